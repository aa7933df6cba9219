// dlht-bench's adapter to GrowT's uaGrow (growing, asynchronous migration,
// deletions): u64 -> u64 behind the C API of peer_common.hpp. Ours; GrowT
// itself comes from the checkout named by DLHT_GROWT_DIR (see
// src/compare/cpp.rs), compiled by build.rs.
//
// Keys. uaGrow marks migrated cells with a key's top bit and reserves the
// key 0 (empty) and 2^63 - 1 (deleted): it holds keys 1 ..= 2^63 - 2. The
// bench's keys are splitmix64(i) for small i, half of them with the top bit
// set, so the table stores e = splitmix64^-1(k) + 1 (a bijection, two
// multiplies): every key whose inverse is below 2^63 - 2 fits, every bench
// key among them. A key that does not fit is refused by insert (-1) and
// absent for get, remove and put.
//
// Handles. GrowT reaches its table only through per-thread handles, which
// must not be shared between threads at once and must die before their
// table. Each thread takes the lowest free slot number (given back when it
// exits); each table holds at most one handle per slot, made on the slot's
// first request and reused by every later thread holding that slot, and
// destroys them all before itself. A request costs a thread-local read and
// two loads to find its handle; none allocates after the first.
//
// A GrowT handle pins the table version it last used (its destructor does
// not unpin), so a slot idle since a migration keeps the old version's
// memory until a thread takes the slot again. Before a table is destroyed
// its handles are moved to the current version, so that none is leaked.

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "allocator/alignedallocator.hpp"
#include "data-structures/table_config.hpp"
#include "utils/hash/murmur2_hash.hpp"

#include "peer_common.hpp"

namespace {

// Slots: SLOTS_PER_CHUNK * CHUNKS threads may hold one at a time.
constexpr uint32_t SLOTS_PER_CHUNK = 64;
constexpr uint32_t CHUNKS = 64;
constexpr uint32_t MAX_SLOTS = SLOTS_PER_CHUNK * CHUNKS;
constexpr uint32_t NO_SLOT = UINT32_MAX;

struct SlotRegistry {
    std::mutex mutex;
    std::vector<bool> used = std::vector<bool>(MAX_SLOTS, false);
};

// Never destroyed: threads give their slots back at exit, which may come
// after static destructors.
SlotRegistry& registry() {
    static SlotRegistry* r = new SlotRegistry;
    return *r;
}

// The fast path reads this (trivially destructible: no TLS guard).
thread_local uint32_t tl_slot = NO_SLOT;

struct SlotOwner {
    uint32_t slot;
    ~SlotOwner() {
        auto& r = registry();
        std::lock_guard<std::mutex> g(r.mutex);
        r.used[slot] = false;
        tl_slot = NO_SLOT;
    }
};

__attribute__((noinline)) uint32_t take_slot() {
    auto& r = registry();
    uint32_t s = NO_SLOT;
    {
        std::lock_guard<std::mutex> g(r.mutex);
        for (uint32_t i = 0; i < MAX_SLOTS; ++i) {
            if (!r.used[i]) {
                r.used[i] = true;
                s = i;
                break;
            }
        }
    }
    if (s == NO_SLOT) {
        std::fprintf(stderr, "growt adapter: more than %u threads at once\n", MAX_SLOTS);
        std::abort();
    }
    // Registers the destructor that gives the slot back at thread exit.
    thread_local SlotOwner owner{s};
    owner.slot = s;
    tl_slot = s;
    return s;
}

inline uint32_t my_slot() {
    uint32_t s = tl_slot;
    return __builtin_expect(s != NO_SLOT, 1) ? s : take_slot();
}

// The key a bench key is stored as, or 0 if it cannot be held.
inline uint64_t encode(uint64_t k) {
    uint64_t x = dlht_peer::unsplitmix64(k);
    return x <= (uint64_t(1) << 63) - 3 ? x + 1 : 0;
}

struct Overwrite {
    uint64_t operator()(uint64_t& cur, uint64_t v) const { return cur = v; }
};

template <class Hash>
class Growt {
    using table_type = typename growt::table_config<uint64_t, uint64_t, Hash, growt::AlignedAllocator<>,
                                                    hmod::growable, hmod::deletion>::table_type;
    using handle_type = typename table_type::handle_type;

    table_type table_;
    std::atomic<handle_type**> chunks_[CHUNKS] = {};

    __attribute__((noinline)) handle_type& make_handle(uint32_t s) {
        auto& chunk = chunks_[s / SLOTS_PER_CHUNK];
        handle_type** c = chunk.load(std::memory_order_acquire);
        if (!c) {
            auto* fresh = new handle_type*[SLOTS_PER_CHUNK]();
            if (chunk.compare_exchange_strong(c, fresh, std::memory_order_acq_rel)) {
                c = fresh;
            } else {
                delete[] fresh;
            }
        }
        handle_type*& h = c[s % SLOTS_PER_CHUNK];
        if (!h) h = new handle_type(table_.get_handle());
        return *h;
    }

    inline handle_type& handle() {
        uint32_t s = my_slot();
        handle_type** c = chunks_[s / SLOTS_PER_CHUNK].load(std::memory_order_acquire);
        if (__builtin_expect(c != nullptr, 1)) {
            handle_type* h = c[s % SLOTS_PER_CHUNK];
            if (__builtin_expect(h != nullptr, 1)) return *h;
        }
        return make_handle(s);
    }

  public:
    explicit Growt(size_t capacity) : table_(capacity) {}

    ~Growt() {
        // No thread uses the table any more (the Rust side owns it).
        for (auto& chunk : chunks_) {
            handle_type** c = chunk.load(std::memory_order_acquire);
            if (!c) continue;
            for (uint32_t i = 0; i < SLOTS_PER_CHUNK; ++i) {
                if (c[i]) {
                    c[i]->find(1); // move its pin to the current version
                    delete c[i];
                }
            }
            delete[] c;
        }
    }

    int insert(uint64_t k, uint64_t v) {
        uint64_t e = encode(k);
        if (e == 0) return -1;
        return handle().insert(e, v).second ? 1 : 0;
    }

    bool get(uint64_t k, uint64_t* out) {
        uint64_t e = encode(k);
        if (e == 0) return false;
        auto& h = handle();
        auto it = h.find(e);
        if (it == h.end()) return false;
        *out = (*it).second;
        return true;
    }

    bool remove(uint64_t k) {
        uint64_t e = encode(k);
        if (e == 0) return false;
        return handle().erase(e) == 1;
    }

    bool put(uint64_t k, uint64_t v) {
        uint64_t e = encode(k);
        if (e == 0) return false;
        return handle().update(e, Overwrite{}, v).second;
    }
};

using GrowtRapid = Growt<dlht_peer::RapidU64>;
// GrowT's own default when neither its CMake build nor the xxHash submodule
// picks another (utils_tm's default_hash without a define): murmur2.
using GrowtOwn = Growt<utils_tm::hash_tm::murmur2_hash>;

} // namespace

DLHT_PEER_API(dlht_growt_rapid, GrowtRapid)
DLHT_PEER_API(dlht_growt_own, GrowtOwn)
