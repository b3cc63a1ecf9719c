//! Data-driven policy tests: `testdata/<policy>` files, run through the shared harness
//! (`strata_exec::datadriven`, whose documentation lists the directives). Run with `REWRITE=1`
//! to regenerate expectations (then read the diff).

#[test]
fn policies() {
    strata_policy::testing::register();
    strata_exec::datadriven::run_policy_tests("testdata");
}
