//! Which kind of Total.js file a path is, judged from its place in the project (TOTALJS.md §1.1).

/// The role of a file in a Total.js 5 project.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The project's `index.js`, which boots the app.
    Index,
    Controller,
    Schema,
    Action,
    Definition,
    /// `modules/`, `models/`, `extensions/`, `middleware/`, `sources/`, `scripts/`, `transforms/`.
    Module,
    /// `plugins/<id>/index.js`.
    PluginIndex,
    /// Any other server-side `.js` file (tests, tools, flows).
    OtherJs,
    /// `config` (the project's or a plugin's).
    Config,
    /// `config-debug`, `config-release`, `config-test`: v4 overlays that v5 never reads.
    ConfigOverlay,
    /// The project's `package.json`.
    PackageJson,
    /// Not checked: client-side code, dependencies, data, anything not JavaScript.
    Unchecked,
}

/// A classified path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct File {
    pub kind: Kind,
    /// Whether the file lives inside `plugins/<id>/`.
    pub plugin: bool,
}

impl File {
    pub fn is_checked(&self) -> bool {
        self.kind != Kind::Unchecked
    }

    /// Server-side JavaScript: every kind of `.js` file the rules look at.
    pub fn is_js(&self) -> bool {
        matches!(
            self.kind,
            Kind::Index
                | Kind::Controller
                | Kind::Schema
                | Kind::Action
                | Kind::Definition
                | Kind::Module
                | Kind::PluginIndex
                | Kind::OtherJs
        )
    }

    /// Application feature code in the auto-loaded folders (not the boot file, not loose scripts).
    pub fn is_feature(&self) -> bool {
        self.plugin
            || matches!(
                self.kind,
                Kind::Controller | Kind::Schema | Kind::Action | Kind::Definition | Kind::Module
            )
    }
}

/// Folders whose `.js` files run in the browser or are data, never server code.
const NOT_SERVER: &[&str] = &[
    "public",
    "views",
    "node_modules",
    "tmp",
    "logs",
    "databases",
    "bundles",
    "private",
    "templates",
];

pub(crate) fn classify(path: &str) -> File {
    let norm = path.replace('\\', "/");
    let parts: Vec<&str> = norm
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    match parts.as_slice() {
        ["plugins", _id, rest @ ..] if !rest.is_empty() => File {
            kind: classify_parts(rest, true),
            plugin: true,
        },
        _ => File {
            kind: classify_parts(&parts, false),
            plugin: false,
        },
    }
}

fn classify_parts(parts: &[&str], plugin: bool) -> Kind {
    let Some((name, dirs)) = parts.split_last() else {
        return Kind::Unchecked;
    };
    if parts
        .iter()
        .any(|p| p.starts_with('.') || *p == "node_modules")
        && !dirs.is_empty()
    {
        return Kind::Unchecked;
    }
    if dirs.is_empty() {
        return match *name {
            "index.js" if plugin => Kind::PluginIndex,
            "index.js" => Kind::Index,
            "config" => Kind::Config,
            "config-debug" | "config-release" | "config-test" => Kind::ConfigOverlay,
            "package.json" if !plugin => Kind::PackageJson,
            n if n.ends_with(".js") => Kind::OtherJs,
            _ => Kind::Unchecked,
        };
    }
    if !name.ends_with(".js") || NOT_SERVER.contains(&dirs[0]) {
        return Kind::Unchecked;
    }
    match dirs[0] {
        "controllers" => Kind::Controller,
        "schemas" => Kind::Schema,
        "actions" => Kind::Action,
        "definitions" => Kind::Definition,
        "modules" | "models" | "extensions" | "middleware" | "sources" | "scripts"
        | "transforms" => Kind::Module,
        _ => Kind::OtherJs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_classified_by_folder() {
        assert_eq!(classify("controllers/api.js").kind, Kind::Controller);
        assert_eq!(
            classify("./controllers/admin/users.js").kind,
            Kind::Controller
        );
        assert_eq!(classify("index.js").kind, Kind::Index);
        assert_eq!(classify("plugins/admin/index.js").kind, Kind::PluginIndex);
        let f = classify("plugins/admin/controllers/x.js");
        assert_eq!((f.kind, f.plugin), (Kind::Controller, true));
        assert_eq!(classify("config").kind, Kind::Config);
        assert_eq!(classify("plugins/a/config").kind, Kind::Config);
        assert_eq!(classify("config-debug").kind, Kind::ConfigOverlay);
        assert_eq!(classify("public/js/app.js").kind, Kind::Unchecked);
        assert_eq!(
            classify("node_modules/total5/index.js").kind,
            Kind::Unchecked
        );
        assert_eq!(classify("views/index.html").kind, Kind::Unchecked);
        assert_eq!(classify("definitions\\auth.js").kind, Kind::Definition);
        assert_eq!(classify("tests/run.js").kind, Kind::OtherJs);
    }
}
