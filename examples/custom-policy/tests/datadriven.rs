//! The policy's data-driven tests (`testdata/size-tiered`), run by Strata's shared harness just
//! as the built-in policies' are. `REWRITE=1` regenerates the expectations.

#[test]
fn size_tiered_decisions() {
    strata_example_custom_policy::register();
    strata_exec::datadriven::run_policy_tests("testdata");
}
