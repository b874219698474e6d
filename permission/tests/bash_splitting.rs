//! How command lines are split into the commands they run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use totem_permission::bash::{ParseError, split_commands};

fn texts(line: &str) -> Vec<String> {
    split_commands(line)
        .unwrap_or_else(|e| panic!("{line:?} did not parse: {e}"))
        .iter()
        .map(|c| c.text())
        .collect()
}

fn fails(line: &str) -> ParseError {
    match split_commands(line) {
        Ok(cmds) => panic!("{line:?} parsed as {cmds:?}"),
        Err(e) => e,
    }
}

#[test]
fn splits_on_and_or_semicolon_pipe_and_background() {
    assert_eq!(
        texts("a && b || c; d | e & f"),
        ["a", "b", "c", "d", "e", "f"]
    );
    assert_eq!(texts("a |& b"), ["a", "b"]);
}

#[test]
fn splits_on_newlines() {
    assert_eq!(texts("ls\nrm -rf x\n"), ["ls", "rm -rf x"]);
}

#[test]
fn quoted_separators_stay_inside_their_word() {
    assert_eq!(
        texts("echo 'a; rm -rf x' \"b && c\""),
        ["echo a; rm -rf x b && c"]
    );
    let cmds = split_commands("grep -e 'a|b' file").unwrap();
    assert_eq!(cmds.len(), 1);
    assert_eq!(cmds[0].words[2].text, "a|b");
}

#[test]
fn command_substitution_is_a_command_of_its_own() {
    assert_eq!(texts("echo $(rm -rf x)"), ["rm -rf x", "echo $(…)"]);
}

#[test]
fn command_substitution_inside_double_quotes_is_found() {
    assert_eq!(
        texts("echo \"hi $(whoami; rm y)\""),
        ["whoami", "rm y", "echo hi $(…)"]
    );
}

#[test]
fn single_quotes_hide_substitutions() {
    assert_eq!(texts("echo '$(rm -rf x)'"), ["echo $(rm -rf x)"]);
}

#[test]
fn backticks_are_command_substitution() {
    assert_eq!(texts("echo `rm -rf x`"), ["rm -rf x", "echo `…`"]);
}

#[test]
fn nested_substitutions_are_all_found() {
    assert_eq!(
        texts("echo $(cat $(rm a))"),
        ["rm a", "cat $(…)", "echo $(…)"]
    );
}

#[test]
fn subshells_and_groups_are_opened() {
    assert_eq!(texts("(cd x && rm y)"), ["cd x", "rm y"]);
    assert_eq!(texts("{ ls; rm z; }"), ["ls", "rm z"]);
}

#[test]
fn process_substitution_is_a_command() {
    assert_eq!(
        texts("diff <(ls a) >(rm b)"),
        ["ls a", "rm b", "diff <(…) >(…)"]
    );
}

#[test]
fn bash_c_script_is_split_too() {
    assert_eq!(
        texts("bash -c 'ls; rm -rf x'"),
        ["bash -c ls; rm -rf x", "ls", "rm -rf x"]
    );
    assert_eq!(texts("sh -c \"rm a\""), ["sh -c rm a", "rm a"]);
    assert_eq!(texts("bash -lc 'rm b'"), ["bash -lc rm b", "rm b"]);
}

#[test]
fn eval_arguments_are_a_script() {
    assert_eq!(
        texts("eval 'rm -rf x; ls'"),
        ["eval rm -rf x; ls", "rm -rf x", "ls"]
    );
}

#[test]
fn eval_of_an_expansion_is_opaque() {
    let cmds = split_commands("eval \"$CMD\"").unwrap();
    assert!(cmds.iter().any(|c| c.opaque));
}

#[test]
fn wrappers_add_their_inner_command() {
    assert_eq!(texts("sudo -u root rm x"), ["sudo -u root rm x", "rm x"]);
    assert_eq!(texts("env FOO=1 rm x"), ["env FOO=1 rm x", "FOO=1 rm x"]);
    assert_eq!(texts("nice -n 5 rm x"), ["nice -n 5 rm x", "rm x"]);
    assert_eq!(
        texts("timeout -s KILL 10 rm x"),
        ["timeout -s KILL 10 rm x", "rm x"]
    );
    assert_eq!(texts("nohup rm x"), ["nohup rm x", "rm x"]);
    assert_eq!(texts("command rm x"), ["command rm x", "rm x"]);
    assert_eq!(texts("exec rm x"), ["exec rm x", "rm x"]);
}

#[test]
fn command_dash_v_runs_nothing() {
    assert_eq!(texts("command -v rm"), ["command -v rm"]);
}

#[test]
fn xargs_runs_its_command() {
    assert_eq!(
        texts("ls | xargs -n1 rm -f"),
        ["ls", "xargs -n1 rm -f", "rm -f"]
    );
    assert_eq!(texts("xargs -I {} rm {}"), ["xargs -I {} rm {}", "rm {}"]);
}

#[test]
fn find_exec_runs_its_command() {
    assert_eq!(
        texts("find . -name '*.o' -exec rm {} \\;"),
        ["find . -name *.o -exec rm {} ;", "rm {}"]
    );
    assert_eq!(
        texts("find . -execdir sh -c 'rm x' +"),
        ["find . -execdir sh -c rm x +", "sh -c rm x", "rm x"]
    );
}

#[test]
fn nested_wrappers_unwrap_all_the_way() {
    assert_eq!(
        texts("sudo env bash -c 'rm x'"),
        [
            "sudo env bash -c rm x",
            "env bash -c rm x",
            "bash -c rm x",
            "rm x"
        ]
    );
}

#[test]
fn leading_assignments_are_kept_apart() {
    let cmds = split_commands("FOO=1 BAR=\"a b\" rm x").unwrap();
    assert_eq!(cmds[0].assignments.len(), 2);
    assert_eq!(cmds[0].command_text(), "rm x");
    assert_eq!(cmds[0].text(), "FOO=1 BAR=a b rm x");
}

#[test]
fn a_quoted_name_is_not_an_assignment() {
    let cmds = split_commands("\"FOO\"=1 ls").unwrap();
    assert!(cmds[0].assignments.is_empty());
    assert_eq!(cmds[0].program(), Some("FOO=1"));
}

#[test]
fn redirections_are_kept_apart_from_words() {
    let cmds = split_commands("cargo test > out.txt 2>&1").unwrap();
    assert_eq!(cmds[0].text(), "cargo test");
    let written: Vec<_> = cmds[0]
        .redirects
        .iter()
        .filter_map(|r| r.written_file())
        .collect();
    assert_eq!(written, ["out.txt"]);
}

#[test]
fn redirections_without_spaces_and_with_descriptors() {
    let cmds = split_commands("echo a>b 2>>err.log &>all.log").unwrap();
    assert_eq!(cmds[0].text(), "echo a");
    let written: Vec<_> = cmds[0]
        .redirects
        .iter()
        .filter_map(|r| r.written_file())
        .collect();
    assert_eq!(written, ["b", "err.log", "all.log"]);
}

#[test]
fn dev_null_and_descriptor_duplication_write_no_file() {
    let cmds = split_commands("ls 2>/dev/null >&2 1>&-").unwrap();
    assert!(cmds[0].redirects.iter().all(|r| r.written_file().is_none()));
}

#[test]
fn bash_redirect_both_streams_to_file_is_a_write() {
    let cmds = split_commands("ls >&log.txt").unwrap();
    assert_eq!(cmds[0].redirects[0].written_file(), Some("log.txt"));
}

#[test]
fn line_continuations_join_words() {
    assert_eq!(texts("rm \\\n  -rf x"), ["rm -rf x"]);
    assert_eq!(texts("r\\\nm x"), ["rm x"]);
}

#[test]
fn comments_are_ignored_but_hash_inside_words_is_not() {
    assert_eq!(texts("ls # ; rm -rf x"), ["ls"]);
    assert_eq!(texts("echo a#b"), ["echo a#b"]);
}

#[test]
fn keywords_of_compound_commands_are_stripped() {
    assert_eq!(
        texts("if grep -q x f; then rm f; else ls; fi"),
        ["grep -q x f", "rm f", "ls"]
    );
    assert_eq!(texts("while true; do rm x; done"), ["true", "rm x"]);
    assert_eq!(texts("! rm x"), ["rm x"]);
    assert_eq!(texts("time rm x"), ["rm x"]);
}

#[test]
fn a_quoted_keyword_is_a_program() {
    assert_eq!(texts("'if' x"), ["if x"]);
}

#[test]
fn for_loop_header_runs_nothing_but_its_substitutions_do() {
    assert_eq!(
        texts("for f in $(rm a); do echo $f; done"),
        ["rm a", "echo $f"]
    );
}

#[test]
fn function_definitions_expose_their_body() {
    assert_eq!(texts("f() { rm x; }; f"), ["rm x", "f"]);
    assert_eq!(texts("function g { rm y; }"), ["rm y"]);
}

#[test]
fn unquoted_heredoc_substitutions_are_found() {
    assert_eq!(
        texts("cat <<EOF\nhello $(rm x)\nEOF\nls"),
        ["cat", "rm x", "ls"]
    );
}

#[test]
fn quoted_heredoc_body_is_literal() {
    assert_eq!(texts("cat <<'EOF'\n$(rm x); rm y\nEOF"), ["cat"]);
    assert_eq!(texts("cat <<-EOF\n\tbody\n\tEOF\nls"), ["cat", "ls"]);
}

#[test]
fn heredoc_body_lines_are_not_commands() {
    assert_eq!(texts("cat > f.txt <<EOF\nrm -rf /\nEOF"), ["cat"]);
}

#[test]
fn ansi_c_strings_make_a_dynamic_word() {
    let cmds = split_commands("$'\\x72\\x6d' -rf x").unwrap();
    assert!(cmds[0].program_is_dynamic());
}

#[test]
fn variable_program_is_dynamic() {
    let cmds = split_commands("$CMD -rf x").unwrap();
    assert!(cmds[0].program_is_dynamic());
    let cmds = split_commands("\"${X}\" y").unwrap();
    assert!(cmds[0].program_is_dynamic());
}

#[test]
fn unbalanced_quotes_are_errors() {
    assert_eq!(fails("echo 'abc"), ParseError::UnterminatedQuote('\''));
    assert_eq!(fails("echo \"abc"), ParseError::UnterminatedQuote('"'));
    assert_eq!(fails("echo `abc"), ParseError::UnterminatedQuote('`'));
}

#[test]
fn unbalanced_parentheses_are_errors() {
    fails("(ls");
    fails("ls)");
    fails("echo $(ls");
}

#[test]
fn case_and_arrays_are_unsupported() {
    fails("case $x in a) rm x;; esac");
    fails("a=(1 2 3)");
}

#[test]
fn substitutions_hidden_in_parameter_expansion_are_refused() {
    fails("echo ${x:-$(rm y)}");
    fails("echo $(( $(rm y) + 1 ))");
}

#[test]
fn unterminated_heredoc_is_an_error() {
    fails("cat <<EOF\nno end");
}

#[test]
fn redirection_without_target_is_an_error() {
    fails("ls >");
    fails("ls > ; rm x");
}

#[test]
fn trailing_backslash_is_an_error() {
    fails("ls \\");
}

#[test]
fn deep_nesting_is_refused() {
    let line = format!("{}ls{}", "$(".repeat(40), ")".repeat(40));
    assert_eq!(fails(&line), ParseError::TooDeep);
}

#[test]
fn empty_line_runs_nothing() {
    assert!(texts("").is_empty());
    assert!(texts("  # just a comment").is_empty());
}
