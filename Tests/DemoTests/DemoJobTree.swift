import Foundation
import Progression

/// The demo's job with its folders' jobs: the job's tree, then the tree of each child job its links stand for.
enum DemoJobTree {
    static func read(_ id: String, from store: any TaskStore) async throws -> [TaskRecord] {
        let tree = try await store.tree(of: id)
        var all = tree
        for link in tree where link.isLink {
            if let child = link.childJobID { all += try await store.tree(of: child) }
        }
        return all
    }
}
