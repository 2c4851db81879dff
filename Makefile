# `make test` is what CI runs: formatting, lints, the T-SQL syntax gate and
# every test. Live tests run when FENCEPOST_TEST_MSSQL names an engine.

SQLFLUFF_VERSION := 4.5.0
VENV             := .venv
SQLFLUFF         := $(VENV)/bin/sqlfluff
SQL_DIRS         := migrations procedures permissions benches

.PHONY: test msrv-check fmt-check clippy each-feature sql-check check-offline nextest cargo-test publish-check cli-doc

test: msrv-check fmt-check clippy each-feature sql-check check-offline cargo-test

# The declared rust-version is the toolchain this run builds and tests with.
msrv-check:
	.ci/msrv-check

fmt-check:
	cargo fmt --all -- --check

# Feature "fake" (the model and the fake client) is a test double a service
# opts into: off by default, on for the lints and tests of its own code.
clippy:
	cargo clippy --all-targets --locked --features fake -- -D warnings

# The client alone (what a service builds) linted and tested, and each
# feature alone linted: no feature set a user may pick fails to build.
each-feature: nextest
	.ci/each-feature

# sqlfluff parses every file as T-SQL; an unparsable section fails the gate.
# The install is tried three times: a registry answer cut off in transit
# (pip then fails to decode the index page) is not a fault of the checkout.
$(SQLFLUFF):
	python3 -m venv $(VENV)
	@for attempt in 1 2 3; do \
	  $(VENV)/bin/pip install --quiet --disable-pip-version-check \
	    sqlfluff==$(SQLFLUFF_VERSION) && exit 0; \
	  echo "sql-check: installing sqlfluff failed (attempt $$attempt of 3)"; \
	  sleep $$((attempt * 10)); \
	done; exit 1

sql-check: $(SQLFLUFF)
	@for dir in $(SQL_DIRS); do \
	  if ! $(SQLFLUFF) parse --dialect tsql --format none $$dir > /dev/null 2>&1; then \
	    $(SQLFLUFF) parse --dialect tsql $$dir | grep -B1 -A6 'parsing violations' ; \
	    echo "sql-check: $$dir holds T-SQL that does not parse"; exit 1; \
	  fi; \
	done
	@echo "sql-check: every .sql file under $(SQL_DIRS) parses as T-SQL"

# The shipped grants and procedure bodies must pass the audit's offline rules.
check-offline:
	cargo run --quiet --locked -- check --offline

# cargo-nextest runs each test in its own process under a time limit
# (.config/nextest.toml), so a hang fails instead of stalling the run.
nextest:
	@cargo nextest --version > /dev/null 2>&1 || cargo install --locked cargo-nextest

# Without an engine the live tests are left out (nextest's profile
# "offline"), and the summary says how many: "N tests run: N passed, M skipped".
# The doc tests run first, so the run's last line is nextest's summary.
cargo-test: nextest
	cargo test --locked --doc --features fake
	cargo nextest run --locked --all-targets --features fake --no-run
	@if [ -z "$$FENCEPOST_TEST_MSSQL" ]; then \
	  echo "FENCEPOST_TEST_MSSQL is not set: the live tests are not run, and nextest counts them skipped"; \
	  set -x; cargo nextest run --locked --all-targets --features fake --profile offline; \
	else \
	  set -x; tests/with-prepared-databases cargo nextest run --locked --all-targets --features fake; \
	fi

# docs/cli.md, the command-line reference, written anew from the binary's
# own help (`fencepost man --markdown`); the same test fails when they differ.
cli-doc: nextest
	FENCEPOST_UPDATE_CLI_DOC=1 cargo nextest run --locked --features fake -E 'test(=offline::cli_reference::docs_cli_md_is_what_the_binary_prints)'

# The crate as `cargo publish` would upload it: its links resolve inside the
# package, and it builds from the package alone. .ci/run runs it after `make test`.
publish-check:
	.ci/publish-check
