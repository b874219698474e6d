//! `bench-hostile`: runs the adversarial suite (`totem_tests::hostile`) against the real daemon
//! and prints, per attack, whether it held, then the counts tried / held for BENCHMARKS.md.
//!
//! `cargo run -p totem-tests --bin bench-hostile` (add `-- -v` for each attack's details, and
//! `-- --no-sandbox` to run the daemon as on a machine without Landlock).

use totem_tests::hostile::{Suite, attacks};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let verbose = std::env::args().any(|a| a == "-v");
    let no_sandbox = std::env::args().any(|a| a == "--no-sandbox");
    let suite = if no_sandbox {
        Suite::start_with(&[("TOTEM_SANDBOX", "off")]).await
    } else {
        Suite::start().await
    };
    let (mut tried, mut held) = (0, 0);
    for attack in attacks() {
        let outcome = suite.attack(&attack).await;
        tried += 1;
        if outcome.held {
            held += 1;
        }
        let mark = if outcome.held { "held" } else { "GOT THROUGH" };
        println!("{mark:>11}  {}", outcome.name);
        if verbose || !outcome.held {
            println!("             {}", outcome.detail);
        }
    }
    let mode = if no_sandbox { "without" } else { "with" };
    println!("\nhostile tree, {mode} the sandbox: {tried} attacks tried, {held} held");
}
