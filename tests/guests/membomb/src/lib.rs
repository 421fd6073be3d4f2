//! Allocates and keeps 1 MiB chunks until the memory limit stops it.
use toolhost_guest::{Arguments, Descriptor, Output, Tool, ToolError};

struct MemBomb;

impl Tool for MemBomb {
    fn describe() -> Descriptor {
        Descriptor::new("hostile.membomb", "Allocates memory without bound.")
    }

    fn call(_: Arguments) -> Result<Output, ToolError> {
        let mut hoard: Vec<Vec<u8>> = Vec::new();
        loop {
            let mut chunk = vec![0_u8; 1 << 20];
            chunk[0] = 1;
            hoard.push(std::hint::black_box(chunk));
        }
    }
}

toolhost_guest::export_tool!(MemBomb);
