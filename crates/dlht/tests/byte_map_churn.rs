//! A byte map's bins give back the links they empty, in a process of its
//! own: another test's threads holding guards (as `byte_map.rs`'s do,
//! running beside it) keep given-back links from reaching the pool, and the
//! map then grows instead (seen in CI: 2 of 12 runs of the whole file).

mod common;

use common::{key_bytes, word};
use dlht::ByteMap;

/// A byte map holding two keys per bin whose keys all turn over, as a
/// cache's do (insert the newest, remove the oldest): bins give back the
/// link buckets they empty (`protocol::links`), so the links in use stay
/// near what the bins hold at any one time instead of climbing to one per
/// bin that ever held four keys (which cost a cache under a memory limit
/// more than half its items: `dlht-server -m`); the keys present are all
/// there, and the map does not resize.
#[test]
fn churn_gives_emptied_links_back() {
    const N: u64 = 1 << 14;
    let m = ByteMap::with_capacity(N as usize);
    let key = |i: u64| key_bytes(1 + i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % (1 << 40));
    for i in 0..N {
        m.insert(&key(i), &i.to_le_bytes(), &m.guard()).unwrap().unwrap();
    }
    let bins = m.stats().bins;
    for i in N..16 * N {
        // A guard per operation, as a server's request has: links given
        // back reach the pool once the guards that may read them are gone.
        m.insert(&key(i), &i.to_le_bytes(), &m.guard()).unwrap().unwrap();
        assert_eq!(m.remove(&key(i - N), &m.guard()).map(word), Some(i - N));
    }
    let s = m.stats();
    assert_eq!((s.resizes, s.bins), (0, bins), "{s:?}");
    let links = s.memory.link_bytes / 64;
    // About a third of the bins hold a link (those between four keys and
    // their way back down to one); before, the map grew instead.
    assert!(links * 5 < 2 * bins, "{links} links in use over {bins} bins after churn");
    let g = m.guard();
    assert_eq!(m.len(), N as usize);
    assert!((15 * N..16 * N).all(|i| m.get(&key(i), &g).map(word) == Some(i)));
}
