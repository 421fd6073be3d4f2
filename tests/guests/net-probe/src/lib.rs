//! Opens a TCP connection to `address` through the standard library, which on
//! wasm32-wasip2 makes the component import `wasi:sockets`.
use toolhost_guest::{Arguments, Descriptor, Output, Tool, ToolError};

struct NetProbe;

impl Tool for NetProbe {
    fn describe() -> Descriptor {
        Descriptor::new("hostile.net_probe", "Tries to reach the network.")
    }

    fn call(args: Arguments) -> Result<Output, ToolError> {
        let address = args.required_str("address")?;
        let outcome = match std::net::TcpStream::connect(address) {
            Ok(stream) => format!("connected: {stream:?}"),
            Err(error) => format!("error: {error}"),
        };
        Ok(Output::text(outcome))
    }
}

toolhost_guest::export_tool!(NetProbe);
