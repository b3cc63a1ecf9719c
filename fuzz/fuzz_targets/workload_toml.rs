//! `WorkloadSpec::from_toml`, the parser of user-written workload files: never a panic, and
//! whatever it accepts is valid (`validate`) and survives a round trip through TOML unchanged.
//! Seeds: the example files in `examples/workloads/`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_workload::WorkloadSpec;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let spec = match WorkloadSpec::from_toml(text) {
        Ok(spec) => spec,
        Err(message) => {
            assert!(!message.trim().is_empty(), "an empty error message");
            return;
        }
    };
    if let Err(e) = spec.validate() {
        panic!("from_toml accepted a workload that validate refuses: {e}");
    }
    let written = toml::to_string(&spec).expect("an accepted workload serializes");
    let again = WorkloadSpec::from_toml(&written)
        .unwrap_or_else(|e| panic!("a written workload does not load: {e}\n{written}"));
    assert_eq!(again, spec, "the round trip changed the workload");
});
