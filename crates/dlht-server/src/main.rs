//! The `dlht-server` binary: memcached's command line, then serve until
//! killed.

use clap::Parser;
use dlht_server::config::Config;
use dlht_server::server;

fn main() {
    let config = Config::parse();
    if let Err(e) = config.validate() {
        eprintln!("{e}");
        std::process::exit(1);
    }
    let running = match server::start(&config) {
        Ok(running) => running,
        Err(e) => {
            eprintln!("dlht-server: {e}");
            std::process::exit(1);
        }
    };
    // Serve until SIGINT/SIGTERM end the process.
    loop {
        std::thread::park();
        let _ = &running;
    }
}
