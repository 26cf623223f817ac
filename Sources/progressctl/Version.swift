/// The version of the Progression package this `progressctl` was built from, as `progressctl --version` prints it.
///
/// Raised with each release of the package (semantic versioning); a build from a branch between releases carries the
/// last release's number.
enum ProgressionVersion {
    static let current = "0.1.0"
}
