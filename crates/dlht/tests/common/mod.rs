//! Shared test support.
#![allow(dead_code)]

pub mod lin;
