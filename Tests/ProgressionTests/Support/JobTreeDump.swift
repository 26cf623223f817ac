import Foundation
import Progression
import ProgressionTestSupport

/// Prints a job's tree, its children and history, for a test that timed out waiting for it.
func dumpTree(_ id: String, _ database: SharedDatabase) async {
    guard let store = try? database.open(), let parent = try? await store.task(id: id) else { return }
    print("tree: parent \(id) status=\(parent.status) owner=\(parent.ownerID ?? "-") wait=\(String(describing: parent.wait)) next=\(String(describing: parent.nextAttemptAt)) progress=\(parent.progress ?? -1)")
    for link in (try? await store.tree(of: id)) ?? [] {
        if let c = link.childJobID, let child = try? await store.task(id: c) {
            print("tree: link \(link.id) \(link.status) awaited=\(link.awaited) -> child \(child.id) \(child.status) owner=\(child.ownerID ?? "-") wait=\(String(describing: child.wait)) next=\(String(describing: child.nextAttemptAt)) attempt=\(child.attempt)")
        } else {
            print("tree: node \(link.id) \(link.name) \(link.status)")
        }
    }
    for e in (try? await store.events(of: id)) ?? [] { print("tree: event \(e.taskID) \(e.kind) \(e.message ?? "")") }
    print("tree: owners \(((try? await store.owners()) ?? []).map { "\($0.id) \($0.heartbeatAt)" })")
}
