//! `strata`: the Strata command-line tool (see the library, `strata_cli`).

fn main() -> anyhow::Result<()> {
    strata_cli::main()
}
