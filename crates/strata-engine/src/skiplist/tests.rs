//! Tests of the arena skip list: heights, memory, both header forms, cursors against a sorted
//! vector, walks, and readers and writers at once.

use super::*;

/// Plain byte order.
struct Bytewise;

impl KeyOrder for Bytewise {
    fn compare(a: &[u8], b: &[u8]) -> Ordering {
        a.cmp(b)
    }
}

#[test]
fn heights_follow_the_branching_factor() {
    let mut rng = 7;
    let n = 100_000;
    let mut total = 0;
    let mut tall = 0;
    for _ in 0..n {
        let h = random_height(&mut rng);
        assert!((1..=MAX_HEIGHT).contains(&h));
        total += h;
        tall += usize::from(h >= 2);
    }
    let mean = total as f64 / n as f64;
    // E[h] = 1 / (1 - 1/2) = 2; P(h >= 2) = 1/2.
    assert!((mean - 2.0).abs() < 0.03, "{mean}");
    assert!((tall as f64 / n as f64 - 0.5).abs() < 0.01);
}

#[test]
fn memory_counts_what_the_entries_occupy() {
    let list = SkipList::<Bytewise>::new();
    let empty = list.memory_usage();
    for i in 0..10_000u32 {
        list.insert(&[&i.to_be_bytes()[..], b"abcd"], &[7u8; 100]);
    }
    let per_entry = (list.memory_usage() - empty) as f64 / 10_000.0;
    // 2 links of 8, then header 4 + key 8 + value 100 rounded up to 8 (112).
    assert!((126.0..130.0).contains(&per_entry), "{per_entry}");
}

#[test]
fn both_header_forms_keep_their_lengths() {
    let list = SkipList::<Bytewise>::new();
    // (key length, value length) on both sides of each short-form limit.
    let shapes = [
        (1, 0),
        (SHORT_KEY_LIMIT - 1, SHORT_VALUE_LIMIT - 1),
        (SHORT_KEY_LIMIT, 5),
        (7, SHORT_VALUE_LIMIT),
        (SHORT_KEY_LIMIT + 3, 3 * SHORT_VALUE_LIMIT),
        (64 << 10, 0),
    ];
    for (i, &(key_len, value_len)) in shapes.iter().enumerate() {
        let mut key = vec![b'a' + i as u8; key_len];
        key[0] = i as u8;
        list.insert(&[&key], &vec![i as u8; value_len]);
    }
    let mut c = Cursor::default();
    c.seek_to_first(&list);
    for (i, &(key_len, value_len)) in shapes.iter().enumerate() {
        assert!(c.valid());
        let (key, value) = (c.key(&list), c.value(&list));
        assert_eq!((key.len(), key[0]), (key_len, i as u8));
        assert!(key[1..].iter().all(|&b| b == b'a' + i as u8));
        assert_eq!(value.len(), value_len);
        assert!(value.iter().all(|&b| b == i as u8));
        c.next(&list);
    }
    assert!(!c.valid());
    assert_eq!(header_len(SHORT_KEY_LIMIT - 1, SHORT_VALUE_LIMIT - 1), 4);
    assert_eq!(header_len(SHORT_KEY_LIMIT, 0), 12);
    assert_eq!(header_len(0, SHORT_VALUE_LIMIT), 12);
}

proptest::proptest! {
    /// Inserts in any order, then every cursor move agrees with a sorted model.
    #[test]
    fn cursor_moves_like_a_sorted_vec(
        keys in proptest::collection::vec(proptest::collection::vec(0u8..4, 0..4), 0..200),
        probes in proptest::collection::vec(proptest::collection::vec(0u8..4, 0..4), 1..40),
    ) {
        let list = SkipList::<Bytewise>::new();
        let mut model: Vec<Vec<u8>> = Vec::new();
        for (i, k) in keys.iter().enumerate() {
            // Keys are unique, as internal keys are (a sequence number each).
            if model.contains(k) {
                continue;
            }
            let (a, b) = k.split_at(k.len() / 2);
            list.insert(&[a, b], &(i as u32).to_le_bytes());
            model.push(k.clone());
        }
        model.sort();
        proptest::prop_assert_eq!(list.len(), model.len());
        let mut c = Cursor::default();
        c.seek_to_first(&list);
        let mut forward = Vec::new();
        while c.valid() {
            forward.push(c.key(&list).to_vec());
            c.next(&list);
        }
        proptest::prop_assert_eq!(&forward, &model);
        let mut walked = Vec::new();
        let mut walk = Walk::new(&list);
        while walk.cursor().valid() {
            walked.push(walk.cursor().key(&list).to_vec());
            walk.next();
        }
        proptest::prop_assert_eq!(&walked, &model);
        let mut backward = Vec::new();
        c.seek_to_last(&list);
        while c.valid() {
            backward.push(c.key(&list).to_vec());
            c.prev(&list);
        }
        backward.reverse();
        proptest::prop_assert_eq!(&backward, &model);
        for p in &probes {
            c.seek(&list, p);
            let ge = model.iter().find(|k| k.as_slice() >= p.as_slice());
            let found = c.valid().then(|| c.key(&list).to_vec());
            proptest::prop_assert_eq!(found.as_ref(), ge);
            c.seek_for_prev(&list, p);
            let le = model.iter().rev().find(|k| k.as_slice() <= p.as_slice());
            let found = c.valid().then(|| c.key(&list).to_vec());
            proptest::prop_assert_eq!(found.as_ref(), le);
        }
    }
}

#[test]
fn a_walk_hands_out_every_entry_in_order_across_many_lanes() {
    let list = SkipList::<Bytewise>::new();
    let n = 50_000u32;
    for i in 0..n {
        let k = i.wrapping_mul(2_654_435_761).to_be_bytes();
        list.insert(&[&k], &i.to_le_bytes());
    }
    let mut expected: Vec<[u8; 4]> = (0..n)
        .map(|i| i.wrapping_mul(2_654_435_761).to_be_bytes())
        .collect();
    expected.sort();
    let mut walk = Walk::new(&list);
    let mut got = Vec::new();
    while walk.cursor().valid() {
        let c = walk.cursor();
        let v = u32::from_le_bytes(c.value(&list).try_into().unwrap());
        assert_eq!(c.key(&list), v.wrapping_mul(2_654_435_761).to_be_bytes());
        got.push(<[u8; 4]>::try_from(c.key(&list)).unwrap());
        walk.next();
    }
    // Many batches of several lanes each were needed.
    assert!(n as usize > (4 * WALK_LANES) << WALK_LEVEL);
    assert_eq!(got, expected);
    assert!(!Walk::new(&SkipList::<Bytewise>::new()).cursor().valid());
}

#[test]
fn a_walk_beside_a_writer_sees_what_was_there_in_order() {
    let list = std::sync::Arc::new(SkipList::<Bytewise>::new());
    for i in 0..20_000u32 {
        list.insert(&[&(2 * i).to_be_bytes()], b"before");
    }
    let writer = {
        let list = std::sync::Arc::clone(&list);
        std::thread::spawn(move || {
            for i in 0..20_000u32 {
                list.insert(&[&(2 * i + 1).to_be_bytes()], b"during");
            }
        })
    };
    let mut before = 0;
    let mut last: Option<Vec<u8>> = None;
    let mut walk = Walk::new(&*list);
    while walk.cursor().valid() {
        let c = walk.cursor();
        let k = c.key(&list).to_vec();
        if let Some(l) = &last {
            assert!(*l < k, "out of order");
        }
        before += usize::from(c.value(&list) == b"before");
        last = Some(k);
        walk.next();
    }
    writer.join().unwrap();
    assert_eq!(
        before, 20_000,
        "every entry there before the walk began is seen"
    );
}

#[test]
fn walks_begun_while_a_writer_inserts_before_the_first_entry_stay_in_the_list() {
    // Every insert lands before the first entry. A walk reads the list's start and its first
    // lane boundary at two moments; a tall node linked between them is a boundary its first lane
    // never meets, unless the start is read after the boundary (it once stepped past the end of
    // the list and crashed). Many short walks, so that some begin while a tall node is linked.
    let list = std::sync::Arc::new(SkipList::<Bytewise>::new());
    let keys = 1_000_000u32;
    let writer = {
        let list = std::sync::Arc::clone(&list);
        std::thread::spawn(move || {
            for i in (0..keys).rev() {
                list.insert_concurrently(&[&i.to_be_bytes()], b"v", || {});
            }
        })
    };
    let mut walks = 0u64;
    while !writer.is_finished() {
        let mut walk = Walk::new(&*list);
        let mut last: Option<Vec<u8>> = None;
        // The first stretch is enough: the race is in how it begins.
        for _ in 0..64 {
            if !walk.cursor().valid() {
                break;
            }
            let k = walk.cursor().key(&list).to_vec();
            if let Some(l) = &last {
                assert!(*l < k, "out of order");
            }
            last = Some(k);
            walk.next();
        }
        walks += 1;
    }
    writer.join().unwrap();
    assert!(walks > 100, "only {walks} walks ran beside the writer");
    let mut walk = Walk::new(&*list);
    let mut seen = 0;
    while walk.cursor().valid() {
        seen += 1;
        walk.next();
    }
    assert_eq!(seen, keys as usize);
}

#[test]
fn readers_see_whole_entries_while_a_writer_inserts() {
    let list = std::sync::Arc::new(SkipList::<Bytewise>::new());
    let writer = {
        let list = std::sync::Arc::clone(&list);
        std::thread::spawn(move || {
            for i in 0..50_000u32 {
                let k = i.wrapping_mul(2_654_435_761).to_be_bytes();
                list.insert(&[&k], &k);
            }
        })
    };
    let mut seen = 0;
    while !writer.is_finished() || seen == 0 {
        let mut c = Cursor::default();
        c.seek_to_first(&list);
        let mut last: Option<Vec<u8>> = None;
        seen = 0;
        while c.valid() {
            let (k, v) = (c.key(&list), c.value(&list));
            assert_eq!(k, v, "a reader saw a half-written entry");
            if let Some(l) = &last {
                assert!(l.as_slice() < k, "out of order");
            }
            last = Some(k.to_vec());
            seen += 1;
            c.next(&list);
        }
    }
    writer.join().unwrap();
    assert_eq!(list.len(), 50_000);
}

#[test]
fn concurrent_writers_link_every_entry_in_order_at_every_level() {
    let list = std::sync::Arc::new(SkipList::<Bytewise>::new());
    let per_thread = 20_000u32;
    std::thread::scope(|s| {
        // Four writers over interleaved keys, so that they race for the same splices, and
        // a reader checking that what it sees is whole and in order.
        for t in 0..4u32 {
            let list = &list;
            s.spawn(move || {
                for i in 0..per_thread {
                    let k = (i.wrapping_mul(2_654_435_761) ^ t).to_be_bytes();
                    let key = [&k[..], &t.to_be_bytes()[..]].concat();
                    list.insert_concurrently(&[&key], &key, || {});
                }
            });
        }
        let list = &list;
        s.spawn(move || {
            for _ in 0..20 {
                let mut c = Cursor::default();
                c.seek_to_first(list);
                let mut last: Option<Vec<u8>> = None;
                while c.valid() {
                    let (k, v) = (c.key(list), c.value(list));
                    assert_eq!(k, v, "a reader saw a half-written entry");
                    assert!(last.as_deref().is_none_or(|l| l < k), "out of order");
                    last = Some(k.to_vec());
                    c.next(list);
                }
            }
        });
    });
    // Concurrent inserts leave the count to their caller; level 0 holds every entry.
    assert_eq!(list.len(), 0);
    assert_levels_sorted(&list, 4 * per_thread as usize);
    for t in 0..4u32 {
        let k = (7u32.wrapping_mul(2_654_435_761) ^ t).to_be_bytes();
        let key = [&k[..], &t.to_be_bytes()[..]].concat();
        let mut c = Cursor::default();
        c.seek(&list, &key);
        assert!(c.valid() && c.key(&list) == key.as_slice());
    }
}

/// Every level of `list` is a sorted chain and level 0 holds `len` entries; where the writer
/// still knows the tail, it is each level's last node (the head for an empty level).
fn assert_levels_sorted(list: &SkipList<Bytewise>, len: usize) {
    let w = list.inserts.writer.lock();
    for level in 0..MAX_HEIGHT {
        let mut x = list.head;
        let mut count = 0;
        let mut last: Option<&[u8]> = None;
        loop {
            // SAFETY: the head and every node reached at `level` are at least that tall.
            let next = unsafe { Node::next(x, level) };
            if next.is_null() {
                break;
            }
            // SAFETY: a published node of `list`.
            let k = unsafe { Node::key(next) };
            assert!(last.is_none_or(|l| l < k), "level {level} out of order");
            last = Some(k);
            count += 1;
            x = next;
        }
        if level == 0 {
            assert_eq!(count, len);
        }
        if w.tail_known {
            assert_eq!(w.tail[level], x, "the tail of level {level}");
        }
    }
}

#[test]
fn appends_link_after_the_tail_and_entries_out_of_order_still_find_their_place() {
    let list = SkipList::<Bytewise>::new();
    let mut expected = std::collections::BTreeSet::new();
    for i in 0..5_000u32 {
        // Mostly ascending, with every seventh key below the last (it must be searched for),
        // and every eleventh inserted the ordinary way.
        let k = if i % 7 == 3 { i / 2 * 4 + 1 } else { i * 4 };
        let key = k.to_be_bytes();
        if i % 11 == 0 {
            list.insert_with(&[&key], &key, || {});
        } else {
            list.append_with(&[&key], &key, || {});
        }
        expected.insert(key.to_vec());
    }
    assert_levels_sorted(&list, expected.len());
    let mut c = Cursor::default();
    c.seek_to_first(&list);
    for key in &expected {
        assert!(c.valid());
        assert_eq!((c.key(&list), c.value(&list)), (&key[..], &key[..]));
        c.next(&list);
    }
    assert!(!c.valid());

    // After a concurrent insert the tail is not known: appends search, and stay in order.
    list.insert_concurrently(&[&7u32.to_be_bytes()], b"x", || {});
    for k in [100_000u32, 2, 100_001] {
        list.append_with(&[&k.to_be_bytes()], b"y", || {});
    }
    assert!(!list.inserts.writer.lock().tail_known);
    assert_levels_sorted(&list, expected.len() + 4);
}

#[test]
fn dropped_arenas_keep_a_bounded_number_of_spare_chunks_and_reused_chunks_hold_new_data() {
    for round in 0..3 {
        let arenas: Vec<Arena> = (0..MAX_SPARE_CHUNKS + 4)
            .map(|_| {
                let mut arena = Arena::new();
                arena.allocate(8);
                arena
            })
            .collect();
        drop(arenas);
        assert!(
            SPARE_CHUNKS.lock().len() <= MAX_SPARE_CHUNKS,
            "round {round}"
        );
    }
    // A list built on reused chunks reads back what it was given.
    let list = SkipList::<Bytewise>::new();
    for i in 0..50_000u32 {
        let key = i.to_be_bytes();
        list.insert(&[&key], &key);
    }
    let mut cursor = Cursor::default();
    let mut n = 0u32;
    cursor.seek_to_first(&list);
    while cursor.valid() {
        assert_eq!(cursor.key(&list), n.to_be_bytes());
        assert_eq!(cursor.value(&list), n.to_be_bytes());
        n += 1;
        cursor.next(&list);
    }
    assert_eq!(n, 50_000);
}

#[test]
fn concurrent_writers_allocate_entries_of_every_size_whole() {
    // Entries up to a quarter of a shard's block come from each thread's shard, larger ones
    // from the arena itself; four writers at once, so that shards run out and take new blocks
    // while the others allocate.
    let list = SkipList::<Bytewise>::new();
    let sizes = [
        0,
        100,
        5_000,
        SHARD_BLOCK / 4 - 64,
        SHARD_BLOCK / 4 + 8,
        SHARD_BLOCK,
    ];
    let per_thread = 300u32;
    std::thread::scope(|s| {
        for t in 0..4u32 {
            let list = &list;
            s.spawn(move || {
                for i in 0..per_thread {
                    let key = (i * 4 + t).to_be_bytes();
                    let value = vec![(i ^ t) as u8; sizes[i as usize % sizes.len()]];
                    list.insert_concurrently(&[&key], &value, || {});
                }
            });
        }
    });
    let entries = 4 * per_thread as usize;
    list.add_len(entries);
    assert_eq!(list.len(), entries);
    assert_levels_sorted(&list, entries);
    let mut c = Cursor::default();
    c.seek_to_first(&list);
    let mut value_bytes = 0;
    for n in 0..4 * per_thread {
        let (i, t) = (n / 4, n % 4);
        assert!(c.valid(), "entry {n} missing");
        assert_eq!(c.key(&list), n.to_be_bytes());
        let value = c.value(&list);
        assert_eq!(value.len(), sizes[i as usize % sizes.len()], "entry {n}");
        assert!(
            value.iter().all(|&b| b == (i ^ t) as u8),
            "entry {n} damaged"
        );
        value_bytes += value.len();
        c.next(&list);
    }
    assert!(!c.valid());
    assert!(list.memory_usage() >= value_bytes);
}
