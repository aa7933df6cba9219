// Shared by dlht-bench's C++ peer adapters (growt.cpp, boost_cfm.cpp): the
// hash both peers get in place of dlht's, and the C API every adapter
// exports. Ours; no peer code is copied here. See src/compare/cpp.rs.
#pragma once

#include <cstdint>
#include <random>
#include <type_traits>

namespace dlht_peer {

// rapidhash's folded multiply: the 128-bit product's halves XORed.
inline uint64_t rapid_mix(uint64_t a, uint64_t b) {
    unsigned __int128 r = (unsigned __int128)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

// rapidhash's published secrets (the ones dlht's hasher, the Rust crate
// rapidhash, also starts from).
constexpr uint64_t SECRET0 = 0x2d358dccaa6c78a5ull;
constexpr uint64_t SECRET1 = 0x8bb84b93962eacc9ull;

// One random seed per process: GrowT default-constructs its hasher (each
// migration's new table too), so a per-table seed cannot reach it.
inline uint64_t process_seed() {
    static const uint64_t seed = [] {
        std::random_device rd;
        return ((uint64_t)rd() << 32) ^ rd();
    }();
    return seed;
}

// The formula of dlht's default hasher (rapidhash's `quality` hasher on one
// u64: the sponge's mix, then the avalanche step): two folded multiplies.
struct RapidU64 {
    // Boost.Unordered: the hash needs no post-mixing.
    using is_avalanching = std::true_type;
    uint64_t seed = process_seed();
    uint64_t operator()(uint64_t k) const { return rapid_mix(rapid_mix(k ^ seed, SECRET0), SECRET1); }
};

// splitmix64 (the bench's key function) and its inverse: a bijection of
// the 64-bit words.
inline uint64_t splitmix64(uint64_t x) {
    uint64_t z = x + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

inline uint64_t unsplitmix64(uint64_t z) {
    z = z ^ (z >> 31) ^ (z >> 62);
    z *= 0x319642B2D24D8EC3ull; // inverse of 0x94D049BB133111EB mod 2^64
    z = z ^ (z >> 27) ^ (z >> 54);
    z *= 0x96DE1B173F119089ull; // inverse of 0xBF58476D1CE4E5B9 mod 2^64
    z = z ^ (z >> 30) ^ (z >> 60);
    return z - 0x9E3779B97F4A7C15ull;
}

} // namespace dlht_peer

// The C API of one adapter instantiation, `PREFIX_create` … `PREFIX_put`,
// over a class `W` with `W(size_t capacity)` and the member functions
// insert (1 inserted, 0 present, -1 a key the peer cannot hold), get,
// remove and put. noexcept: a C++ exception (bad_alloc) ends the process
// instead of unwinding into Rust.
#define DLHT_PEER_API(PREFIX, W)                                                             \
    extern "C" void* PREFIX##_create(size_t capacity) noexcept { return new W(capacity); }   \
    extern "C" void PREFIX##_destroy(void* t) noexcept { delete static_cast<W*>(t); }        \
    extern "C" int PREFIX##_insert(void* t, uint64_t k, uint64_t v) noexcept {               \
        return static_cast<W*>(t)->insert(k, v);                                             \
    }                                                                                        \
    extern "C" bool PREFIX##_get(void* t, uint64_t k, uint64_t* out) noexcept {              \
        return static_cast<W*>(t)->get(k, out);                                              \
    }                                                                                        \
    extern "C" bool PREFIX##_remove(void* t, uint64_t k) noexcept {                          \
        return static_cast<W*>(t)->remove(k);                                                \
    }                                                                                        \
    extern "C" bool PREFIX##_put(void* t, uint64_t k, uint64_t v) noexcept {                 \
        return static_cast<W*>(t)->put(k, v);                                                \
    }
