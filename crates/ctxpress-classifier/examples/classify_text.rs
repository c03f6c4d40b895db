//! Print the classification of each argument (or of stdin); with `--time`,
//! time `classify` on 10 MB of a few adversarial shapes.
#![allow(missing_docs)]
use std::io::Read;

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "--time") {
        for shape in args.iter().skip(1) {
            let text = shape.repeat(10 * 1024 * 1024 / shape.len().max(1));
            let start = std::time::Instant::now();
            let c = ctxpress_classifier::classify(&text);
            let dt = start.elapsed();
            println!(
                "{shape:?}: {:?} ({:.0} MB/s) {:?}",
                dt,
                text.len() as f64 / 1e6 / dt.as_secs_f64(),
                c
            );
        }
        return;
    }
    if args.is_empty() {
        let mut s = String::new();
        let _ = std::io::stdin().read_to_string(&mut s);
        args.push(s);
    }
    for a in args {
        let c = ctxpress_classifier::classify(&a);
        println!("{}", serde_json::to_string(&c).unwrap_or_default());
    }
}
