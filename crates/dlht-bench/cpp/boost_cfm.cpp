// dlht-bench's adapter to Boost.Unordered's boost::concurrent_flat_map
// (Boost >= 1.83): u64 -> u64 behind the C API of peer_common.hpp. Ours;
// Boost.Unordered itself comes from the tree named by
// DLHT_BOOST_UNORDERED_DIR (see src/compare/cpp.rs), compiled by build.rs.
// Every key and value is allowed; a get copies the value out under the
// element's group lock (cvisit), a put assigns it under the exclusive one
// (visit).

#include <cstdint>

#include <boost/unordered/concurrent_flat_map.hpp>

#include "peer_common.hpp"

namespace {

template <class Hash>
class Cfm {
    boost::concurrent_flat_map<uint64_t, uint64_t, Hash> map_;

  public:
    // reserve: room for `capacity` elements without a rehash (the
    // constructor's argument counts buckets, not elements).
    explicit Cfm(size_t capacity) { map_.reserve(capacity); }

    int insert(uint64_t k, uint64_t v) { return map_.emplace(k, v) ? 1 : 0; }

    bool get(uint64_t k, uint64_t* out) const {
        return map_.cvisit(k, [out](const auto& kv) { *out = kv.second; }) == 1;
    }

    bool remove(uint64_t k) { return map_.erase(k) == 1; }

    bool put(uint64_t k, uint64_t v) {
        return map_.visit(k, [v](auto& kv) { kv.second = v; }) == 1;
    }
};

using CfmRapid = Cfm<dlht_peer::RapidU64>;
// Boost's own default: boost::hash (the identity on integers), which the
// table post-mixes itself because it is not marked avalanching.
using CfmOwn = Cfm<boost::hash<uint64_t>>;

} // namespace

DLHT_PEER_API(dlht_boost_cfm_rapid, CfmRapid)
DLHT_PEER_API(dlht_boost_cfm_own, CfmOwn)
