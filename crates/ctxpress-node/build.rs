//! Link flags for a Node-API addon (on macOS: leave Node's symbols to the
//! process that loads it).

fn main() {
    napi_build::setup();
}
