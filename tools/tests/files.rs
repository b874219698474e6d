//! read, list, glob, grep, write, edit and patch against real temp directories.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use serde_json::{Value, json};
use totem_tools::{AccessKind, Registry, ToolContext, ToolOutput};

struct Project {
    dir: tempfile::TempDir,
    ctx: ToolContext,
}

impl Project {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolContext::new(dir.path()).unwrap();
        Self { dir, ctx }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn put(&self, rel: &str, content: impl AsRef<[u8]>) -> &Self {
        let path = self.root().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
        self
    }

    fn get(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root().join(rel)).unwrap()
    }

    async fn call(&self, tool: &str, args: Value) -> ToolOutput {
        match Registry::builtin().prepare(tool, args, &self.ctx, false) {
            Ok(call) => call.run(&self.ctx).await,
            Err(e) => e.into(),
        }
    }
}

// ── read ─────────────────────────────────────────────────────────────────────────────────

#[tokio::test]
async fn read_numbers_lines() {
    let p = Project::new();
    p.put("a.txt", "alpha\nbeta\n");
    let out = p.call("read", json!({"path": "a.txt"})).await;
    assert!(!out.is_error);
    assert_eq!(out.text, "    1\talpha\n    2\tbeta\n");
}

#[tokio::test]
async fn read_honours_offset_and_limit_and_says_how_to_continue() {
    let p = Project::new();
    let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    p.put("a.txt", text);
    let out = p
        .call("read", json!({"path": "a.txt", "offset": 3, "limit": 2}))
        .await;
    assert!(
        out.text.starts_with("    3\tline 3\n    4\tline 4\n"),
        "{}",
        out.text
    );
    assert!(
        out.text
            .contains("(lines 3-4 of 10; continue with offset=5)"),
        "{}",
        out.text
    );
    assert!(out.meta.truncated);
}

#[tokio::test]
async fn read_cuts_very_long_lines() {
    let p = Project::new();
    p.put("long.txt", format!("{}\nshort\n", "x".repeat(5000)));
    let out = p.call("read", json!({"path": "long.txt"})).await;
    assert!(out.text.contains("… (line cut)"));
    assert!(out.text.len() < 3000, "{}", out.text.len());
    assert!(out.text.contains("    2\tshort"));
}

#[tokio::test]
async fn read_caps_output_bytes_with_a_hint() {
    let p = Project::new();
    let text: String = (1..=5000).map(|i| format!("{i:0>40}\n")).collect();
    p.put("big.txt", text);
    let out = p.call("read", json!({"path": "big.txt"})).await;
    assert!(out.text.len() <= 51_000, "{}", out.text.len());
    assert!(
        out.text
            .contains("output capped at 50 KB; continue with offset=")
    );
}

#[tokio::test]
async fn read_detects_binary_files() {
    let p = Project::new();
    p.put("bin.dat", [0u8, 1, 2, 3, 0, 255]);
    let out = p.call("read", json!({"path": "bin.dat"})).await;
    assert!(out.is_error);
    assert!(out.text.contains("binary file"), "{}", out.text);
}

#[tokio::test]
async fn read_detects_images_and_keeps_them_as_a_blob() {
    let p = Project::new();
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    png.extend_from_slice(&[0u8; 32]);
    p.put("logo.png", &png);
    let out = p.call("read", json!({"path": "logo.png"})).await;
    assert!(out.text.contains("is an image (image/png"), "{}", out.text);
    assert_eq!(out.meta.image.as_deref(), Some("image/png"));
    assert!(out.meta.blob.is_some());
}

/// Qwen2.5-Coder 0.5B read `/api/ping/` (a URL) five times over in bench-tasks: "file not found"
/// with no names gave it nothing to change. A small project's files are listed; a large one's
/// closest names are.
#[tokio::test]
async fn a_missing_path_with_no_close_name_lists_the_projects_files() {
    let p = Project::new();
    p.put("controllers/default.js", "x\n");
    p.put("views/index.html", "x\n");
    let out = p.call("read", json!({"path": "/api/ping/"})).await;
    assert!(out.is_error);
    assert_eq!(
        out.text,
        "file not found: api/ping. The project's files: controllers/default.js, views/index.html. To create it, use write."
    );
    let out = p
        .call("list", json!({"path": "/app/controllers/definition"}))
        .await;
    assert!(out.is_error);
    assert!(
        out.text.starts_with(
            "app/controllers/definition does not exist. The project's files: controllers/default.js"
        ),
        "{}",
        out.text
    );
    for i in 0..40 {
        p.put(&format!("lib/mod{i}.js"), "x\n");
    }
    p.put("lib/ping.js", "x\n");
    let out = p.call("read", json!({"path": "api/ping.js"})).await;
    assert!(
        out.text.contains("Files with similar names: lib/ping.js,"),
        "{}",
        out.text
    );
}

/// bench-tasks: "modules does not exist. Did you mean: node_modules?" where node_modules links to
/// a shared install outside the project, so the model's next call was refused as outside.
#[tokio::test]
async fn a_link_out_of_the_project_is_never_suggested() {
    let p = Project::new();
    let shared = tempfile::tempdir().expect("temp dir");
    std::os::unix::fs::symlink(shared.path(), p.root().join("node_modules")).expect("symlink");
    p.put("my_modules/a.js", "x\n");
    let out = p.call("list", json!({"path": "modules"})).await;
    assert!(out.is_error);
    assert!(!out.text.contains("node_modules"), "{}", out.text);
    assert!(out.text.contains("my_modules"), "{}", out.text);
}

#[tokio::test]
async fn read_missing_file_suggests_close_names() {
    let p = Project::new();
    p.put("src/main.rs", "fn main() {}\n");
    let out = p.call("read", json!({"path": "src/mian.rs"})).await;
    assert!(out.is_error);
    assert!(
        out.text.contains("Did you mean: src/main.rs?"),
        "{}",
        out.text
    );
}

#[tokio::test]
async fn read_of_a_directory_points_to_list() {
    let p = Project::new();
    p.put("src/a.rs", "");
    let out = p.call("read", json!({"path": "src"})).await;
    assert!(out.is_error);
    assert!(out.text.contains("use list"));
}

#[tokio::test]
async fn read_asks_read_permission_for_the_relative_path() {
    let p = Project::new();
    p.put("a.txt", "x");
    let call = Registry::builtin()
        .prepare("read", json!({"path": "./a.txt"}), &p.ctx, false)
        .unwrap();
    assert_eq!(call.plan.access.len(), 1);
    assert_eq!(call.plan.access[0].kind, AccessKind::Read);
    assert_eq!(call.plan.access[0].target, "a.txt");
    assert!(call.plan.writes.is_empty());
}

// ── list ─────────────────────────────────────────────────────────────────────────────────

#[tokio::test]
async fn list_shows_a_tree_and_honours_gitignore() {
    let p = Project::new();
    p.put(".gitignore", "build/\n*.log\n")
        .put("src/main.rs", "")
        .put("build/out.o", "")
        .put("debug.log", "")
        .put("README.md", "");
    let out = p.call("list", json!({})).await;
    assert!(out.text.contains("src/\n  main.rs\n"), "{}", out.text);
    assert!(out.text.contains("README.md"));
    assert!(!out.text.contains("build"), "{}", out.text);
    assert!(!out.text.contains("debug.log"), "{}", out.text);
}

#[tokio::test]
async fn list_never_shows_the_git_directory() {
    let p = Project::new();
    p.put(".git/HEAD", "ref").put("a.txt", "");
    let out = p.call("list", json!({})).await;
    assert!(!out.text.contains("HEAD"), "{}", out.text);
}

#[tokio::test]
async fn list_is_capped() {
    let p = Project::new();
    for i in 0..450 {
        p.put(&format!("f{i:03}.txt"), "");
    }
    let out = p.call("list", json!({})).await;
    assert!(out.meta.truncated);
    assert_eq!(out.text.lines().filter(|l| l.starts_with('f')).count(), 400);
    assert!(out.text.contains("stopped at 400 entries"));
}

#[tokio::test]
async fn list_respects_depth() {
    let p = Project::new();
    p.put("a/b/c/deep.txt", "");
    let out = p.call("list", json!({"depth": 1})).await;
    assert_eq!(out.text, "a/\n");
}

// ── glob ─────────────────────────────────────────────────────────────────────────────────

#[tokio::test]
async fn glob_matches_names_anywhere_and_honours_gitignore() {
    let p = Project::new();
    p.put(".gitignore", "node_modules/\n")
        .put("src/a.js", "")
        .put("src/lib/b.js", "")
        .put("node_modules/x/index.js", "")
        .put("c.ts", "");
    let out = p.call("glob", json!({"pattern": "*.js"})).await;
    let mut lines: Vec<&str> = out.text.lines().collect();
    lines.sort();
    assert_eq!(lines, ["src/a.js", "src/lib/b.js"]);
}

#[tokio::test]
async fn glob_with_a_path_pattern_is_anchored() {
    let p = Project::new();
    p.put("src/a.rs", "")
        .put("src/sub/b.rs", "")
        .put("other/c.rs", "");
    let out = p.call("glob", json!({"pattern": "src/*.rs"})).await;
    assert_eq!(out.text, "src/a.rs\n");
    let out = p.call("glob", json!({"pattern": "src/**/*.rs"})).await;
    assert_eq!(out.text.lines().count(), 2);
}

#[tokio::test]
async fn glob_with_a_folder_prefix_still_honours_gitignore() {
    let p = Project::new();
    p.put(".gitignore", "target/\n")
        .put("target/debug/a.rs", "")
        .put("src/sub/.gitignore", "gen.rs\n")
        .put("src/sub/gen.rs", "")
        .put("src/sub/b.rs", "")
        .put("other/src/c.rs", "");
    let out = p.call("glob", json!({"pattern": "target/**/*.rs"})).await;
    assert_eq!(out.text, "no files match target/**/*.rs");
    let out = p.call("glob", json!({"pattern": "src/sub/*.rs"})).await;
    assert_eq!(out.text, "src/sub/b.rs\n");
    let out = p.call("glob", json!({"pattern": "src/**"})).await;
    let mut lines: Vec<&str> = out.text.lines().collect();
    lines.sort();
    assert_eq!(lines, ["src/sub/.gitignore", "src/sub/b.rs"]);
}

#[tokio::test]
async fn glob_caps_the_list_at_the_newest_files() {
    let p = Project::new();
    let now = std::time::SystemTime::now();
    for i in 0..250u64 {
        let rel = format!("d{}/f{i:03}.txt", i % 7);
        p.put(&rel, "");
        std::fs::File::options()
            .write(true)
            .open(p.root().join(&rel))
            .unwrap()
            .set_modified(now - std::time::Duration::from_secs(i))
            .unwrap();
    }
    let out = p.call("glob", json!({"pattern": "*.txt"})).await;
    let lines: Vec<&str> = out.text.lines().collect();
    assert_eq!(lines.len(), 201, "{}", out.text);
    assert_eq!(lines[0], "d0/f000.txt");
    assert_eq!(lines[1], "d1/f001.txt");
    assert_eq!(lines[199], "d3/f199.txt");
    assert_eq!(
        lines[200],
        "(200 of 250 files shown, newest first; narrow the pattern or path)"
    );
    assert!(out.meta.truncated);
}

#[tokio::test]
async fn glob_lists_newest_first() {
    let p = Project::new();
    p.put("old.md", "");
    let past = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(p.root().join("old.md"))
        .unwrap()
        .set_modified(past)
        .unwrap();
    p.put("new.md", "");
    let out = p.call("glob", json!({"pattern": "*.md"})).await;
    assert_eq!(out.text, "new.md\nold.md\n");
}

#[tokio::test]
async fn glob_within_a_subdirectory_returns_root_relative_paths() {
    let p = Project::new();
    p.put("src/a.rs", "").put("b.rs", "");
    let out = p
        .call("glob", json!({"pattern": "*.rs", "path": "src"}))
        .await;
    assert_eq!(out.text, "src/a.rs\n");
}

#[tokio::test]
async fn glob_without_matches_says_so() {
    let p = Project::new();
    let out = p.call("glob", json!({"pattern": "*.zig"})).await;
    assert!(!out.is_error);
    assert_eq!(out.text, "no files match *.zig");
}

// ── grep ─────────────────────────────────────────────────────────────────────────────────

#[tokio::test]
async fn grep_groups_matches_by_file_in_path_order_with_counts() {
    let p = Project::new();
    p.put("b.rs", "fn alpha() {}\nfn beta() {}\n")
        .put("a.rs", "  fn gamma() {}\n");
    let out = p.call("grep", json!({"pattern": "fn \\w+"})).await;
    assert_eq!(
        out.text,
        "3 matches in 2 files\na.rs (1)\n  1: fn gamma() {}\nb.rs (2)\n  1: fn alpha() {}\n  2: fn beta() {}\n"
    );
}

#[tokio::test]
async fn grep_honours_gitignore() {
    let p = Project::new();
    p.put(".gitignore", "dist/\n")
        .put("dist/bundle.js", "needle\n")
        .put("src/app.js", "needle\n");
    let out = p.call("grep", json!({"pattern": "needle"})).await;
    assert!(out.text.contains("src/app.js"));
    assert!(!out.text.contains("dist"), "{}", out.text);
}

#[tokio::test]
async fn grep_literal_treats_regex_characters_as_text() {
    let p = Project::new();
    p.put("a.txt", "a.b\naxb\n");
    let out = p
        .call("grep", json!({"pattern": "a.b", "literal": true}))
        .await;
    assert!(out.text.starts_with("1 matches"), "{}", out.text);
    let out = p.call("grep", json!({"pattern": "a.b"})).await;
    assert!(out.text.starts_with("2 matches"), "{}", out.text);
}

#[tokio::test]
async fn grep_include_filters_files() {
    let p = Project::new();
    p.put("a.ts", "hit\n").put("b.js", "hit\n");
    let out = p
        .call("grep", json!({"pattern": "hit", "include": "*.ts"}))
        .await;
    assert!(
        out.text.contains("a.ts") && !out.text.contains("b.js"),
        "{}",
        out.text
    );
}

#[tokio::test]
async fn grep_include_with_a_folder_keeps_ignore_rules_and_paths() {
    let p = Project::new();
    p.put(".gitignore", "dist/\n")
        .put("web/src/a.ts", "hit\n")
        .put("web/src/deep/b.ts", "hit\n")
        .put("web/dist/c.ts", "hit\n")
        .put("api/src/d.ts", "hit\n");
    let out = p
        .call("grep", json!({"pattern": "hit", "include": "web/**/*.ts"}))
        .await;
    assert_eq!(
        out.text,
        "2 matches in 2 files\nweb/src/a.ts (1)\n  1: hit\nweb/src/deep/b.ts (1)\n  1: hit\n"
    );
    let out = p
        .call(
            "grep",
            json!({"pattern": "hit", "path": "web", "include": "src/*.ts"}),
        )
        .await;
    assert_eq!(
        out.text,
        "1 matches in 1 files\nweb/src/a.ts (1)\n  1: hit\n"
    );
}

#[tokio::test]
async fn grep_ignore_case() {
    let p = Project::new();
    p.put("a.txt", "Hello\n");
    let out = p
        .call("grep", json!({"pattern": "hello", "ignoreCase": true}))
        .await;
    assert!(out.text.contains("a.txt (1)"));
}

#[tokio::test]
async fn grep_caps_lines_but_reports_every_count() {
    let p = Project::new();
    let text: String = (0..150).map(|i| format!("match {i}\n")).collect();
    p.put("a.txt", &text).put("b.txt", "match\n");
    let out = p.call("grep", json!({"pattern": "match"})).await;
    assert!(out.meta.truncated);
    assert!(out.text.contains("a.txt (150)"));
    assert!(out.text.contains("b.txt (1)"));
    assert!(
        out.text.contains("100 of 151 matching lines shown"),
        "{}",
        out.text
    );
}

#[tokio::test]
async fn grep_skips_binary_files() {
    let p = Project::new();
    p.put("bin.dat", b"needle\0\0\0").put("a.txt", "needle\n");
    let out = p.call("grep", json!({"pattern": "needle"})).await;
    assert!(!out.text.contains("bin.dat"), "{}", out.text);
}

#[tokio::test]
async fn grep_never_opens_secret_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".env"), "TOKEN=abc\n").unwrap();
    std::fs::write(dir.path().join("a.txt"), "TOKEN\n").unwrap();
    let ctx = ToolContext::new(dir.path())
        .unwrap()
        .with_secret_filter(std::sync::Arc::new(|rel: &str| rel.starts_with(".env")));
    let call = Registry::builtin()
        .prepare("grep", json!({"pattern": "TOKEN"}), &ctx, false)
        .unwrap();
    let out = call.run(&ctx).await;
    assert!(
        out.text.contains("a.txt") && !out.text.contains(".env"),
        "{}",
        out.text
    );
}

#[tokio::test]
async fn grep_bad_regex_suggests_literal() {
    let p = Project::new();
    let out = p.call("grep", json!({"pattern": "foo("})).await;
    assert!(out.is_error);
    assert!(out.text.contains("literal=true"));
}

// ── write ────────────────────────────────────────────────────────────────────────────────

#[tokio::test]
async fn write_creates_parents_and_reports_a_created_file() {
    let p = Project::new();
    let out = p
        .call("write", json!({"path": "a/b/c.txt", "content": "hi\n"}))
        .await;
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(p.get("a/b/c.txt"), "hi\n");
    assert_eq!(out.text, "Created a/b/c.txt (1 lines)");
    assert!(!out.meta.files[0].existed_before);
    assert!(out.meta.files[0].exists_after);
}

#[tokio::test]
async fn write_overwrites_and_keeps_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let p = Project::new();
    p.put("run.sh", "echo old\n");
    std::fs::set_permissions(
        p.root().join("run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let out = p
        .call("write", json!({"path": "run.sh", "content": "echo new\n"}))
        .await;
    assert!(out.meta.files[0].existed_before);
    assert_eq!(p.get("run.sh"), "echo new\n");
    let mode = std::fs::metadata(p.root().join("run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);
    assert!(out.meta.diff.unwrap().contains("-echo old\n+echo new"));
}

#[tokio::test]
async fn write_declares_the_file_it_will_change() {
    let p = Project::new();
    let call = Registry::builtin()
        .prepare(
            "write",
            json!({"path": "x/y.txt", "content": ""}),
            &p.ctx,
            false,
        )
        .unwrap();
    assert_eq!(call.plan.access[0].kind, AccessKind::Write);
    assert_eq!(call.plan.writes[0].rel, "x/y.txt");
    assert!(
        !p.root().join("x").exists(),
        "prepare must not touch the disk"
    );
}

// ── edit ─────────────────────────────────────────────────────────────────────────────────

/// Small models repeat their last call: the same edit made again is told it is already made,
/// not "not found", and the same text as both strings is told so too when it is there.
#[tokio::test]
async fn the_same_edit_made_twice_is_told_it_is_already_made() {
    let p = Project::new();
    p.put("index.html", "<h1>Acme Shop</h1>\n<p>Tools.</p>\n");
    let edit = json!({"path": "index.html", "oldString": "<h1>Acme Shop</h1>",
                      "newString": "<h1>Welcome to Acme Shop</h1>"});
    let first = p.call("edit", edit.clone()).await;
    assert!(!first.is_error, "{}", first.text);
    let said = "this change is already made (do not make it again; go on with the next change, or answer if the task is done): newString is at line 1 in index.html.";
    let out = p.call("edit", edit).await;
    assert!(out.is_error, "{}", out.text);
    assert_eq!(out.text, said);
    let same = json!({"path": "index.html", "oldString": "<h1>Welcome to Acme Shop</h1>",
                      "newString": "<h1>Welcome to Acme Shop</h1>"});
    let out = p.call("edit", same).await;
    assert!(out.is_error, "{}", out.text);
    assert_eq!(
        out.text,
        "oldString and newString are the same, so this edit changes nothing; put the corrected text in newString to change it in index.html."
    );
    assert_eq!(
        p.get("index.html"),
        "<h1>Welcome to Acme Shop</h1>\n<p>Tools.</p>\n"
    );
}

/// An edit that only removes characters is not told it is already made because its short new
/// text is in the file: the 1.5B turned `about;` into `about` (still broken), and its next try
/// was told that change was made since `about` is on the line.
#[tokio::test]
async fn a_removal_whose_new_text_is_in_the_file_anyway_is_not_already_made() {
    let p = Project::new();
    p.put("c.js", "\tROUTE('GET /about/', about\n");
    let edit = json!({"path": "c.js", "oldString": "about;", "newString": "about"});
    let out = p.call("edit", edit).await;
    assert!(out.is_error, "{}", out.text);
    assert!(!out.text.contains("already made"), "{}", out.text);
    assert_eq!(p.get("c.js"), "\tROUTE('GET /about/', about\n");
}

/// An edit with an empty oldString on an existing file is told how to add lines, with a line of
/// the file to anchor them (a controller's last route); the 1.5B sent it three times to add a route.
#[tokio::test]
async fn an_empty_old_string_is_told_how_to_add_lines() {
    let p = Project::new();
    p.put(
        "controllers/default.js",
        "exports.install = function() {\n\tROUTE('GET /', index);\n\tROUTE('GET /about/', about);\n};\n\nfunction index($) {\n\t$.view('index');\n}\n",
    );
    let out = p
        .call(
            "edit",
            json!({"path": "controllers/default.js", "oldString": "", "newString": "ROUTE('GET /x/', x);"}),
        )
        .await;
    assert!(out.is_error, "{}", out.text);
    assert!(
        out.text.starts_with(
            "oldString is empty. To add lines, set oldString to a line of the file they go after, e.g. \"ROUTE('GET /about/', about);\", and newString to that line followed by your new lines"
        ),
        "{}",
        out.text
    );
    p.put("notes.txt", "one\ntwo\n\n");
    let out = p
        .call(
            "edit",
            json!({"path": "notes.txt", "oldString": "", "newString": "three"}),
        )
        .await;
    assert!(out.text.contains("e.g. \"two\""), "{}", out.text);
}

#[tokio::test]
async fn edit_replaces_an_exact_match() {
    let p = Project::new();
    p.put("a.rs", "fn main() {\n    println!(\"hi\");\n}\n");
    let out = p
        .call(
            "edit",
            json!({"path": "a.rs", "oldString": "\"hi\"", "newString": "\"bye\""}),
        )
        .await;
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(p.get("a.rs"), "fn main() {\n    println!(\"bye\");\n}\n");
    assert_eq!(
        out.text,
        "Edited a.rs: line 2. Now:\n    1\tfn main() {\n    2\t    println!(\"bye\");\n    3\t}",
        "the line as it is now, with a line each side"
    );
}

#[tokio::test]
async fn edit_refuses_an_ambiguous_match_with_line_numbers() {
    let p = Project::new();
    p.put("a.txt", "x = 1\ny = 2\nx = 1\n");
    let out = p
        .call(
            "edit",
            json!({"path": "a.txt", "oldString": "x = 1", "newString": "x = 3"}),
        )
        .await;
    assert!(out.is_error);
    assert!(
        out.text.contains("matches 2 places (lines 1, 3)"),
        "{}",
        out.text
    );
    assert_eq!(p.get("a.txt"), "x = 1\ny = 2\nx = 1\n");
}

#[tokio::test]
async fn edit_replace_all_changes_every_occurrence() {
    let p = Project::new();
    p.put("a.txt", "x = 1\ny = 2\nx = 1\n");
    let out = p
        .call(
            "edit",
            json!({"path": "a.txt", "oldString": "x = 1", "newString": "x = 3", "replaceAll": true}),
        )
        .await;
    assert!(out.text.contains("2 places"), "{}", out.text);
    assert_eq!(p.get("a.txt"), "x = 3\ny = 2\nx = 3\n");
}

#[tokio::test]
async fn edit_indentation_flexible_reindents_the_new_text() {
    let p = Project::new();
    p.put(
        "a.py",
        "def f():\n    if x:\n        return 1\n    return 2\n",
    );
    let out = p
        .call(
            "edit",
            json!({"path": "a.py", "oldString": "if x:\n    return 1", "newString": "if x:\n    log()\n    return 1"}),
        )
        .await;
    assert!(!out.is_error, "{}", out.text);
    assert!(out.text.contains("indentation-flexible"), "{}", out.text);
    assert_eq!(
        p.get("a.py"),
        "def f():\n    if x:\n        log()\n        return 1\n    return 2\n"
    );
}

#[tokio::test]
async fn edit_line_trimmed_ignores_edge_whitespace() {
    let p = Project::new();
    p.put("a.js", "function f() {\n  let a = 1;  \n  let b = 2;\n}\n");
    let out = p
        .call(
            "edit",
            json!({"path": "a.js", "oldString": "let a = 1;\n    let b = 2;", "newString": "let a = 3;\nlet b = 4;"}),
        )
        .await;
    assert!(!out.is_error, "{}", out.text);
    assert!(out.text.contains("line-trimmed"), "{}", out.text);
    assert_eq!(
        p.get("a.js"),
        "function f() {\n  let a = 3;\n  let b = 4;\n}\n"
    );
}

#[tokio::test]
async fn edit_whitespace_normalised_ignores_inner_spacing() {
    let p = Project::new();
    p.put("a.c", "int x=foo( a,b );\n");
    let out = p
        .call("edit", json!({"path": "a.c", "oldString": "int x = foo(a, b);", "newString": "int x = bar(a, b);"}))
        .await;
    assert!(!out.is_error, "{}", out.text);
    assert!(out.text.contains("whitespace-normalised"), "{}", out.text);
    assert_eq!(p.get("a.c"), "int x = bar(a, b);\n");
}

#[tokio::test]
async fn edit_escape_normalised_handles_literal_backslash_n() {
    let p = Project::new();
    p.put("a.txt", "first\nsecond\n");
    let out = p
        .call(
            "edit",
            json!({"path": "a.txt", "oldString": "first\\nsecond", "newString": "one\\ntwo"}),
        )
        .await;
    assert!(!out.is_error, "{}", out.text);
    assert!(out.text.contains("escape-normalised"), "{}", out.text);
    assert_eq!(p.get("a.txt"), "one\ntwo\n");
}

#[tokio::test]
async fn edit_tolerant_match_that_is_ambiguous_is_refused() {
    let p = Project::new();
    p.put("a.txt", "  a\n  b\nc\na\nb\n");
    let out = p
        .call(
            "edit",
            json!({"path": "a.txt", "oldString": " a\n b", "newString": "z"}),
        )
        .await;
    assert!(out.is_error);
    assert!(out.text.contains("lines 1, 4"), "{}", out.text);
}

#[tokio::test]
async fn edit_keeps_crlf_line_endings() {
    let p = Project::new();
    p.put("a.txt", "one\r\ntwo\r\n");
    let out = p
        .call(
            "edit",
            json!({"path": "a.txt", "oldString": "one\ntwo", "newString": "1\n2"}),
        )
        .await;
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(p.get("a.txt"), "1\r\n2\r\n");
}

#[tokio::test]
async fn edit_not_found_points_at_the_closest_line() {
    let p = Project::new();
    p.put("a.rs", "let total = compute(items);\n");
    let out = p
        .call(
            "edit",
            json!({"path": "a.rs", "oldString": "let total = compute(item);", "newString": "x"}),
        )
        .await;
    assert!(out.is_error);
    assert!(out.text.contains("oldString not found"), "{}", out.text);
    assert!(
        out.text
            .contains("closest: line 1: let total = compute(items);"),
        "{}",
        out.text
    );
}

#[tokio::test]
async fn edit_with_empty_old_string_creates_a_missing_file() {
    let p = Project::new();
    let out = p
        .call(
            "edit",
            json!({"path": "new.txt", "oldString": "", "newString": "hello\n"}),
        )
        .await;
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(p.get("new.txt"), "hello\n");
    assert!(!out.meta.files[0].existed_before);
}

#[tokio::test]
async fn edit_refuses_identical_strings() {
    let p = Project::new();
    p.put("a.txt", "x\n");
    let out = p
        .call(
            "edit",
            json!({"path": "a.txt", "oldString": "x", "newString": "x"}),
        )
        .await;
    assert!(out.is_error);
    assert!(out.text.contains("the same"));
}

#[tokio::test]
async fn edit_reports_a_diff_in_metadata() {
    let p = Project::new();
    p.put("a.txt", "a\nb\n");
    let out = p
        .call(
            "edit",
            json!({"path": "a.txt", "oldString": "b", "newString": "c"}),
        )
        .await;
    let diff = out.meta.diff.unwrap();
    assert!(
        diff.contains("--- a/a.txt") && diff.contains("-b\n+c"),
        "{diff}"
    );
}

// ── patch ────────────────────────────────────────────────────────────────────────────────

#[tokio::test]
async fn patch_applies_edits_over_several_files() {
    let p = Project::new();
    p.put("a.txt", "one\n").put("b.txt", "two\n");
    let out = p
        .call(
            "patch",
            json!({"edits": [
                {"path": "a.txt", "oldString": "one", "newString": "1"},
                {"path": "b.txt", "oldString": "two", "newString": "2"},
                {"path": "a.txt", "oldString": "1", "newString": "uno"},
                {"path": "c.txt", "oldString": "", "newString": "new\n"}
            ]}),
        )
        .await;
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(p.get("a.txt"), "uno\n");
    assert_eq!(p.get("b.txt"), "2\n");
    assert_eq!(p.get("c.txt"), "new\n");
    assert_eq!(out.meta.files.len(), 3);
    assert!(out.text.starts_with("Applied 4 edits"));
}

#[tokio::test]
async fn patch_is_all_or_nothing_when_one_edit_fails() {
    let p = Project::new();
    p.put("a.txt", "one\n").put("b.txt", "two\n");
    let out = p
        .call(
            "patch",
            json!({"edits": [
                {"path": "a.txt", "oldString": "one", "newString": "1"},
                {"path": "b.txt", "oldString": "three", "newString": "3"}
            ]}),
        )
        .await;
    assert!(out.is_error);
    assert!(
        out.text.starts_with("edit 2 (b.txt): oldString not found"),
        "{}",
        out.text
    );
    assert!(out.text.contains("Nothing was changed"));
    assert_eq!(p.get("a.txt"), "one\n");
    assert_eq!(p.get("b.txt"), "two\n");
}

#[tokio::test]
async fn patch_rolls_back_written_files_when_a_write_fails() {
    let p = Project::new();
    p.put("a.txt", "one\n").put("b.txt", "two\n");
    // A directory where the atomic write wants its temporary file makes the second write fail,
    // even for root.
    let blocker = format!(".b.txt.totem-{}.tmp", std::process::id());
    std::fs::create_dir(p.root().join(blocker)).unwrap();
    let out = p
        .call(
            "patch",
            json!({"edits": [
                {"path": "a.txt", "oldString": "one", "newString": "1"},
                {"path": "b.txt", "oldString": "two", "newString": "2"}
            ]}),
        )
        .await;
    assert!(out.is_error, "{}", out.text);
    assert!(out.text.contains("cannot write b.txt"), "{}", out.text);
    assert_eq!(p.get("a.txt"), "one\n");
    assert_eq!(p.get("b.txt"), "two\n");
}

#[tokio::test]
async fn patch_declares_every_file_once() {
    let p = Project::new();
    let call = Registry::builtin()
        .prepare(
            "patch",
            json!({"edits": [
                {"path": "a.txt", "oldString": "x", "newString": "y"},
                {"path": "./a.txt", "oldString": "y", "newString": "z"},
                {"path": "b.txt", "oldString": "x", "newString": "y"}
            ]}),
            &p.ctx,
            false,
        )
        .unwrap();
    let targets: Vec<&str> = call.plan.access.iter().map(|a| a.target.as_str()).collect();
    assert_eq!(targets, ["a.txt", "b.txt"]);
    assert_eq!(call.plan.writes.len(), 2);
}

#[tokio::test]
async fn list_does_not_expand_node_modules() {
    let p = Project::new();
    p.put("node_modules/left-pad/index.js", "")
        .put("app.js", "");
    let out = p.call("list", json!({})).await;
    assert_eq!(out.text, "app.js\nnode_modules/ (not expanded)\n");
}

#[tokio::test]
async fn grep_searches_a_single_file_path() {
    let p = Project::new();
    p.put("src/a.rs", "needle\n").put("src/b.rs", "needle\n");
    let out = p
        .call("grep", json!({"pattern": "needle", "path": "src/b.rs"}))
        .await;
    assert_eq!(
        out.text,
        "1 matches in 1 files\nsrc/b.rs (1)\n  1: needle\n"
    );
}

#[tokio::test]
async fn grep_follows_a_symlink_that_stays_inside() {
    let p = Project::new();
    p.put("real/a.txt", "needle\n");
    std::os::unix::fs::symlink(p.root().join("real/a.txt"), p.root().join("link.txt")).unwrap();
    let out = p.call("grep", json!({"pattern": "needle"})).await;
    assert!(out.text.contains("link.txt (1)"), "{}", out.text);
    assert!(out.text.contains("real/a.txt (1)"), "{}", out.text);
}

#[tokio::test]
async fn edit_strips_line_numbers_copied_from_read_output() {
    let p = Project::new();
    p.put("a.rs", "fn a() {}\nfn b() {}\n");
    let out = p
        .call(
            "edit",
            json!({"path": "a.rs", "oldString": "    2\tfn b() {}", "newString": "    2\tfn c() {}"}),
        )
        .await;
    assert!(!out.is_error, "{}", out.text);
    assert!(out.text.contains("line-numbers-removed"), "{}", out.text);
    assert_eq!(p.get("a.rs"), "fn a() {}\nfn c() {}\n");
}

#[tokio::test]
async fn edit_refuses_a_file_over_the_limit_and_stays_linear_below_it() {
    let p = Project::new();
    p.put("big.txt", "line of text\n".repeat(1_000_000)); // 13 MB
    let out = p
        .call(
            "edit",
            json!({"path": "big.txt", "oldString": "line of text", "newString": "x", "replaceAll": true}),
        )
        .await;
    assert!(out.is_error, "{}", out.text);
    assert!(out.text.contains("up to 10 MB"), "{}", out.text);

    // 6 MB of identical lines and an old string that almost matches at each: one pass. A
    // quadratic search would take hours here, so the bound is loose enough for a loaded machine
    // running a debug build (20 s was missed under a load of 12).
    p.put("six.txt", "    same line\n".repeat(430_000));
    let started = std::time::Instant::now();
    let out = p
        .call(
            "edit",
            json!({"path": "six.txt", "oldString": "same line\nsame line\nother", "newString": "x"}),
        )
        .await;
    assert!(out.is_error, "{}", out.text);
    assert!(out.text.contains("not found"), "{}", out.text);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(180),
        "took {:?}",
        started.elapsed()
    );
}

// ── proposed diffs (for permission questions) ───────────────────────────────────────────

#[tokio::test]
async fn a_plan_carries_each_written_files_proposed_diff_and_writes_nothing() {
    let p = Project::new();
    p.put("a.txt", "one\ntwo\n").put("b.txt", "x\n");
    let plan = |tool: &str, args: Value| {
        Registry::builtin()
            .prepare(tool, args, &p.ctx, false)
            .unwrap()
            .plan
    };
    let edit = plan(
        "edit",
        json!({"path": "a.txt", "oldString": "two", "newString": "2"}),
    );
    assert_eq!(
        edit.diffs.get("a.txt").map(String::as_str),
        Some("--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n")
    );
    let write = plan("write", json!({"path": "new.txt", "content": "n\n"}));
    assert_eq!(
        write.diffs.get("new.txt").map(String::as_str),
        Some("--- a/new.txt\n+++ b/new.txt\n@@ -0,0 +1 @@\n+n\n")
    );
    let patch = plan(
        "patch",
        json!({"edits": [
            {"path": "a.txt", "oldString": "one", "newString": "1"},
            {"path": "b.txt", "oldString": "x", "newString": "y"},
        ]}),
    );
    assert_eq!(patch.diffs.len(), 2);
    assert!(patch.diffs["b.txt"].ends_with("-x\n+y\n"));
    // An edit that cannot apply has no diff; the run says why.
    let missing = plan(
        "edit",
        json!({"path": "a.txt", "oldString": "absent", "newString": "z"}),
    );
    assert!(missing.diffs.is_empty());
    assert_eq!(p.get("a.txt"), "one\ntwo\n");
    assert!(!p.root().join("new.txt").exists());
}
