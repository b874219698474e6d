//! `totem web`: the address of the web client totemd serves, with a one-time token, opened in the
//! browser on a desktop. The current folder is opened as a project first, so the page shows it.

use clap::Args;
use totem_protocol::{Method, NoParams, ProjectOpenParams, method};

use crate::daemon::{self, Endpoint};
use crate::exit::{Exit, Unreachable};

/// `totem web`.
#[derive(Debug, Args)]
pub struct WebArgs {
    /// Print the address only; do not start a browser.
    #[arg(long)]
    pub no_open: bool,
}

pub async fn web(endpoint: &Endpoint, args: &WebArgs) -> anyhow::Result<Exit> {
    let connection = daemon::connect_or_start(endpoint).await?;
    if !connection.has(method::WebOpen::NAME) {
        return Err(Unreachable(
            "this totemd has no web client; update it and run `totem daemon stop`, then try again"
                .into(),
        )
        .into());
    }
    if let Ok(dir) = std::env::current_dir() {
        // A folder Totem cannot open (the root, say) simply leaves the page with the others.
        let _ = connection
            .client
            .call::<method::ProjectOpen>(ProjectOpenParams {
                path: dir.display().to_string(),
                by_name: false,
            })
            .await;
    }
    let opened = connection
        .client
        .call::<method::WebOpen>(NoParams {})
        .await?;
    // The address alone on stdout; the rest for a person on stderr.
    println!("{}", opened.url);
    if opened.remote {
        eprintln!(
            "WARNING: totemd listens on an address other machines can reach. Anyone who gets this link within five minutes can steer Totem; send it only over a channel you trust."
        );
    }
    eprintln!(
        "The link works once, within five minutes; the browser that opens it keeps a cookie until totemd stops. Run `totem web` again for another browser."
    );
    if !args.no_open && crate::mcp_login::open_browser(&opened.url) {
        eprintln!("Opened in your browser.");
    }
    Ok(Exit::Success)
}
