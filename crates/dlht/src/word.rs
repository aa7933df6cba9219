//! Keys and values stored inline in a slot: any plain type of at most 8 bytes.

/// A type stored as one 8-byte word in a slot (Inlined mode, paper §3.1).
///
/// Keys are compared by their words: two keys are equal iff their words are.
///
/// # Safety
/// Implementors promise that `from_word(into_word(x))` gives back a value
/// equal to `x`, and that a value may be rebuilt from its word on any
/// thread (the map moves words between threads without `Send` bounds, like
/// a raw pointer's address). Implemented here for the primitive integers,
/// `bool`, `char`, the floats (by bits) and raw pointers.
///
/// ```
/// use dlht::{Inline, Map};
/// #[derive(Clone, Copy, PartialEq, Debug)]
/// struct Rgb(u8, u8, u8);
/// // SAFETY: a plain value, round-tripped exactly through the low 24 bits.
/// unsafe impl Inline for Rgb {
///     fn into_word(self) -> u64 { (self.0 as u64) << 16 | (self.1 as u64) << 8 | self.2 as u64 }
///     fn from_word(w: u64) -> Self { Rgb((w >> 16) as u8, (w >> 8) as u8, w as u8) }
/// }
/// let m: Map<u32, Rgb> = Map::new();
/// m.insert(1, Rgb(255, 128, 0)).unwrap();
/// assert_eq!(m.get(&1), Some(Rgb(255, 128, 0)));
/// ```
pub unsafe trait Inline: Copy + 'static {
    /// The value's word.
    fn into_word(self) -> u64;
    /// The value a word came from.
    fn from_word(w: u64) -> Self;
}

macro_rules! inline_int {
    ($($t:ty => $u:ty),*) => {$(
        // SAFETY: integers round-trip exactly through their zero-extended bits.
        unsafe impl Inline for $t {
            #[inline(always)]
            fn into_word(self) -> u64 { self as $u as u64 }
            #[inline(always)]
            fn from_word(w: u64) -> Self { w as $u as $t }
        }
    )*};
}
inline_int!(u8 => u8, u16 => u16, u32 => u32, u64 => u64, usize => usize,
            i8 => u8, i16 => u16, i32 => u32, i64 => u64, isize => usize);

// SAFETY: the one value of `()` round-trips through any word.
unsafe impl Inline for () {
    #[inline(always)]
    fn into_word(self) -> u64 {
        0
    }
    #[inline(always)]
    fn from_word(_: u64) -> Self {}
}

// SAFETY: round-trips through 0/1.
unsafe impl Inline for bool {
    #[inline(always)]
    fn into_word(self) -> u64 {
        self as u64
    }
    #[inline(always)]
    fn from_word(w: u64) -> Self {
        w != 0
    }
}

// SAFETY: only words produced by into_word (valid scalar values) are decoded.
unsafe impl Inline for char {
    #[inline(always)]
    fn into_word(self) -> u64 {
        self as u64
    }
    #[inline(always)]
    fn from_word(w: u64) -> Self {
        char::from_u32(w as u32).expect("dlht invariant: word is not a char")
    }
}

// SAFETY: floats round-trip through their bit patterns (compared by bits).
unsafe impl Inline for f64 {
    #[inline(always)]
    fn into_word(self) -> u64 {
        self.to_bits()
    }
    #[inline(always)]
    fn from_word(w: u64) -> Self {
        f64::from_bits(w)
    }
}

// SAFETY: as for f64.
unsafe impl Inline for f32 {
    #[inline(always)]
    fn into_word(self) -> u64 {
        self.to_bits() as u64
    }
    #[inline(always)]
    fn from_word(w: u64) -> Self {
        f32::from_bits(w as u32)
    }
}

// SAFETY: a raw pointer is an address; moving it between threads is safe,
// dereferencing it remains the user's unsafe responsibility.
unsafe impl<T: 'static> Inline for *const T {
    #[inline(always)]
    fn into_word(self) -> u64 {
        self as usize as u64
    }
    #[inline(always)]
    fn from_word(w: u64) -> Self {
        w as usize as *const T
    }
}

// SAFETY: as for *const T.
unsafe impl<T: 'static> Inline for *mut T {
    #[inline(always)]
    fn into_word(self) -> u64 {
        self as usize as u64
    }
    #[inline(always)]
    fn from_word(w: u64) -> Self {
        w as usize as *mut T
    }
}

const _: () = assert!(size_of::<usize>() <= 8, "dlht needs pointers of at most 8 bytes");
