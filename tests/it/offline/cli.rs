//! The real binary, driven as a pipeline would drive it, with no server.

use crate::support;

use std::path::Path;

use support::binary::{run as fencepost, stderr, stdout};

#[test]
fn help_explains_every_command() {
    for command in [
        &[][..],
        &["migrate"],
        &["status"],
        &["script"],
        &["check"],
        &["bench"],
        &["artifact"],
        &["artifact", "sweep"],
        &["artifact", "verify"],
    ] {
        let mut args = command.to_vec();
        args.push("--help");
        let output = fencepost(&args);
        assert!(output.status.success());
        let name = if command.is_empty() {
            "help".to_string()
        } else {
            format!("help_{}", command.join("_"))
        };
        insta::assert_snapshot!(name, stdout(&output));
    }
}

/// The end of the T-SQL string literal `text` starts inside of: the index of
/// its closing quote (a doubled quote is one quote of the text).
fn literal_end(text: &str) -> usize {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\'' {
            if bytes.get(i + 1) == Some(&b'\'') {
                i += 2;
                continue;
            }
            return i;
        }
        i += 1;
    }
    panic!("an unterminated string literal: {text}");
}

/// The script with what changes at every procedure edit and every release
/// left out: the text of each `ALTER PROCEDURE` (replaced by the name of the
/// procedure it alters), each procedure's source checksum, and the package
/// version. The rest stays: the sections and their order, the guards, the
/// session options, the stubs, the journal rows, the migrations, the
/// permission scripts and the deployment record.
fn script_skeleton(script: &str) -> String {
    const EXEC: &str = "EXEC (N'";
    let script = script.replace(env!("CARGO_PKG_VERSION"), "[version]");
    let mut skeleton = String::new();
    let mut rest = script.as_str();
    while let Some(at) = rest.find(EXEC) {
        let (before, from) = rest.split_at(at + EXEC.len());
        skeleton += before;
        let end = literal_end(from);
        let literal = &from[..end];
        match literal.split_once("ALTER PROCEDURE ") {
            Some((_, altered)) => {
                let name = altered.split_whitespace().next().unwrap_or_default();
                skeleton += &format!("[the text that alters {name}]");
            }
            None => skeleton += literal,
        }
        rest = &from[end..];
    }
    skeleton += rest;
    // A procedure's source checksum: 64 hex digits in a literal.
    let mut redacted = String::new();
    let mut rest = skeleton.as_str();
    while let Some(at) = rest.find("N'") {
        let (before, from) = rest.split_at(at + 2);
        redacted += before;
        let digits = from.bytes().take_while(u8::is_ascii_hexdigit).count();
        if digits == 64 && from.as_bytes().get(64) == Some(&b'\'') {
            redacted += "[checksum]";
            rest = &from[64..];
        } else {
            rest = from;
        }
    }
    redacted + rest
}

#[test]
fn script_renders_the_whole_deployment() {
    let output = fencepost(&["script"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let script = stdout(&output);
    let skeleton = script_skeleton(&script);
    // Every shipped procedure is altered, once, in the order of its section.
    let procedures = fencepost::deploy::Sources::embedded().unwrap().procedures().len();
    assert_eq!(
        skeleton.matches("[the text that alters ").count(),
        procedures,
        "{skeleton}"
    );
    assert_eq!(skeleton.matches("[checksum]").count(), 2 * procedures, "{skeleton}");
    insta::assert_snapshot!("script", skeleton);
}

#[test]
fn script_writes_to_a_file_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deploy.sql");
    let output = fencepost(&["script", "--output", path.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), stdout(&fencepost(&["script"])));
}

/// A reader that leaves early (`fencepost script | head -1`) ends the command
/// quietly and successfully, as it does other Unix tools. The script is far
/// larger than a pipe holds, so the binary is still writing when the pipe
/// closes.
#[test]
fn a_closed_pipe_ends_the_command_with_status_zero_and_no_message() {
    use std::io::{BufRead, BufReader, Read};
    use std::process::Stdio;

    let mut child = support::binary::fencepost(["script"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start fencepost");
    let mut first = String::new();
    BufReader::new(child.stdout.take().expect("its stdout"))
        .read_line(&mut first)
        .expect("read the first line");
    assert!(first.starts_with("-- fencepost "), "{first}");
    // The reader, and with it the pipe, is dropped here.
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("its stderr")
        .read_to_string(&mut stderr)
        .expect("read its stderr");
    let status = child.wait().expect("wait for fencepost");
    assert_eq!(status.code(), Some(0), "{status:?}: {stderr}");
    assert_eq!(stderr, "");
}

#[test]
fn the_babelfish_postgres_script_names_its_database_and_who_runs_it() {
    let output = fencepost(&["script", "--target", "babelfish-postgres", "--database", "app"]);
    assert!(output.status.success(), "{}", stderr(&output));
    // The package version in its first line changes at every release.
    let script = stdout(&output).replace(env!("CARGO_PKG_VERSION"), "[version]");
    insta::assert_snapshot!("script_babelfish_postgres", script);
}

#[test]
fn the_babelfish_postgres_script_needs_a_database() {
    let output = fencepost(&["script", "--target", "babelfish-postgres"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("--database"), "{}", stderr(&output));
}

#[test]
fn a_missing_connection_names_the_flag_and_the_variable() {
    let output = fencepost(&["status"]);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(
        err.contains("--connection") && err.contains("FENCEPOST_CONNECTION"),
        "{err}"
    );
}

#[test]
fn an_unreachable_server_is_one_line_and_exit_status_2() {
    // Port 1 on loopback: nothing listens there, so the connection is refused at once.
    let output = fencepost(&[
        "status",
        "--connection",
        "Server=tcp:127.0.0.1,1;User ID=u;Password=Secret#1",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("cannot reach 127.0.0.1:1"), "{err}");
    assert!(!err.contains("Secret#1"), "the password leaked: {err}");
}

/// Without a way to sign in as the running identity the string is refused
/// before any connection, naming the builds that have one and what to use
/// instead, as one line with exit status 2 (and a `connect` document in JSON).
#[test]
#[cfg(not(any(windows, all(unix, feature = "integrated-auth-gssapi"))))]
fn integrated_security_in_a_build_without_it_names_the_build_that_has_it() {
    for string in [
        "Server=tcp:127.0.0.1,1;Database=app;Integrated Security=SSPI",
        "Server=tcp:127.0.0.1,1;Database=app;Trusted_Connection=yes",
    ] {
        let output = fencepost(&["status", "--format", "json", "--connection", string]);
        assert_eq!(output.status.code(), Some(2), "{string}");
        let err = stderr(&output);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(
            err.contains("a Windows build") && err.contains("--features integrated-auth-gssapi"),
            "{err}"
        );
        assert!(err.contains("User ID and Password"), "{err}");
        assert!(!err.contains("cannot reach"), "it tried to connect: {err}");
        let document: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("a JSON document");
        assert_eq!(document["error"]["kind"], "connect", "{document}");
    }
}

/// With Kerberos built in, the string is read and the sign-in is tried: here
/// nothing listens, so the failure is the address, not the build.
#[test]
#[cfg(all(unix, feature = "integrated-auth-gssapi"))]
fn integrated_security_in_a_build_with_it_tries_to_connect() {
    let output = fencepost(&[
        "status",
        "--connection",
        "Server=tcp:127.0.0.1,1;Database=app;Integrated Security=SSPI",
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("cannot reach 127.0.0.1:1"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_malformed_connection_string_is_refused() {
    let output = fencepost(&["migrate", "--connection", "Server=x;Connect Timeout=soon"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("Connect Timeout"), "{}", stderr(&output));
}

#[test]
fn an_invalid_source_folder_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    for folder in ["migrations", "procedures", "permissions"] {
        std::fs::create_dir(dir.path().join(folder)).unwrap();
    }
    std::fs::write(
        dir.path().join("procedures/fence_api.Twice.sql"),
        "CREATE PROCEDURE fence_api.Twice AS SELECT 1;\nCREATE PROCEDURE fence_api.Again AS SELECT 2;\n",
    )
    .unwrap();
    let output = fencepost(&["script", "--source-dir", dir.path().to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("procedures/fence_api.Twice.sql"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn check_refuses_a_source_dir_it_would_not_read() {
    // Without --offline, check reads the catalog: a folder would be ignored.
    let root = env!("CARGO_MANIFEST_DIR");
    let output = fencepost(&["check", "--source-dir", root]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("--offline"), "{}", stderr(&output));
    let offline = fencepost(&["check", "--offline", "--source-dir", root]);
    assert_eq!(offline.status.code(), Some(0), "{}", stdout(&offline));
}

#[test]
fn the_repository_folders_render_the_same_script_as_the_binary() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let from_dir = fencepost(&["script", "--source-dir", root.to_str().unwrap()]);
    assert_eq!(stdout(&from_dir), stdout(&fencepost(&["script"])));
}

#[test]
fn bench_refuses_both_a_duration_and_a_count_of_operations() {
    let output = fencepost(&["bench", "--duration", "2s", "--operations", "50"]);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(err.contains("--duration") && err.contains("--operations"), "{err}");
}

#[test]
fn bench_refuses_a_duration_it_cannot_read_and_zero_workers() {
    let output = fencepost(&["bench", "--duration", "soon"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("not a duration"), "{}", stderr(&output));
    let output = fencepost(&["bench", "--workers", "0"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("--workers"), "{}", stderr(&output));
}

#[test]
fn bench_refuses_an_unknown_workload_naming_the_known_ones() {
    let output = fencepost(&["bench", "--workload", "cycle,storm"]);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(err.contains("storm") && err.contains("contended"), "{err}");
}

#[test]
fn bench_without_a_connection_names_the_flag_and_the_variable() {
    let output = fencepost(&["bench", "--operations", "5"]);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(
        err.contains("--connection") && err.contains("FENCEPOST_CONNECTION"),
        "{err}"
    );
}

#[test]
fn check_refuses_an_unknown_rule_to_accept_with_exit_status_2() {
    let output = fencepost(&["check", "--offline", "--accept-unverifiable", "FP002,FP999"]);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(err.contains("unknown rule id 'FP999'"), "{err}");
    // A known id, in any case, is taken.
    let output = fencepost(&[
        "check",
        "--offline",
        "--accept-unverifiable",
        "fp002",
        "--accept-unverifiable",
        "FP015",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
}

#[test]
fn check_refuses_an_unknown_rule_in_the_environment_file_with_exit_status_2() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let config = dir.path().join("fencepost.toml");
    std::fs::write(
        &config,
        "[environments.azure]\nconnection_env = \"NO_SUCH_VARIABLE_SET\"\naccept_unverifiable = [\"FP002\", \"FP0015\"]\n",
    )
    .expect("write the config");
    let output = fencepost(&[
        "check",
        "--offline",
        "--config",
        config.to_str().unwrap(),
        "--environment",
        "azure",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(
        err.contains("environment azure: accept_unverifiable: unknown rule id 'FP0015'"),
        "{err}"
    );
}

#[test]
fn check_that_cannot_reach_the_server_exits_2_not_3_and_says_so_in_json() {
    // Port 1 on loopback: nothing listens there, so the connection is refused at once.
    let output = fencepost(&[
        "check",
        "--format",
        "json",
        "--accept-unverifiable",
        "FP002",
        "--connection",
        "Server=tcp:127.0.0.1,1;User ID=u;Password=Secret#1",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let document: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("a JSON error document");
    assert_eq!(document["error"]["kind"], "connect", "{document}");
    assert!(
        document.get("exit_code").is_none(),
        "an error document, not a report: {document}"
    );
}

#[test]
fn script_grant_ends_the_script_with_the_memberships_and_refuses_a_role_that_is_not_a_fence_role() {
    let output = fencepost(&["script", "--grant", "fence_service=svc_reports"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let script = stdout(&output);
    let section = script
        .find("-- the service users added to the fence roles")
        .expect("a grants section");
    assert!(section > script.find("-- the record of this deployment").unwrap());
    assert!(script[section..].contains("VALUES (N'fence_service', N'svc_reports');"));
    assert!(!fencepost(&["script"]).stdout.windows(12).any(|w| w == b"@Grants TABL"));

    let refused = fencepost(&["script", "--grant", "db_owner=svc_reports"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(stderr(&refused).contains("not a fence role"), "{}", stderr(&refused));
}

/// sqlcmd expands `$(name)` even inside a quoted string, so a member named
/// with one would run as something else; a control character cannot be
/// told from the script around it. Both are refused before anything is
/// printed.
#[test]
fn script_refuses_a_grant_name_sqlcmd_would_expand_or_that_holds_a_control_character() {
    for member in ["svc$(DatabaseName)", "svc\u{1}x", "svc\nGO"] {
        let grant = format!("fence_service={member}");
        let output = fencepost(&["script", "--grant", &grant]);
        assert_ne!(output.status.code(), Some(0), "{member:?}");
        assert!(output.stdout.is_empty(), "{member:?}: printed {}", stdout(&output));
        let said = String::from_utf8_lossy(&output.stderr);
        assert!(
            said.contains("--grant") && said.contains("fence_service"),
            "{member:?}: {said}"
        );
    }
}

/// The two-step path for a strict DBA: the schemas and roles created first,
/// owned by dbo, so that the deployer needs rights on those schemas only.
#[test]
fn script_prints_the_schemas_a_dba_creates_first() {
    let output = fencepost(&["script", "--schemas"]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let script = stdout(&output);
    for schema in ["fence", "fence_api", "fence_admin"] {
        assert!(
            script.contains(&format!("EXEC (N'CREATE SCHEMA {schema} AUTHORIZATION dbo;')")),
            "{schema}: {script}"
        );
    }
}
