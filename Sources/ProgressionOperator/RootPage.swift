import Foundation
import Progression

/// Where a page of a root listing begins: after the last root of the page before it.
///
/// Newest or oldest first (`TaskQuery.Sort.created`), the cursor is that root's creation time and id: the next page
/// is read from the index of roots by age (`created_at, id`) from there, so that page 10,000 costs what page 1 does
/// and roots created meanwhile do not shift it. The other orders (updated, progress) have no index to seek in, and
/// page by offset.
package struct RootCursor: Sendable, Hashable, CustomStringConvertible {
    package enum Position: Sendable, Hashable {
        /// After the root created at `milliseconds` with `id`; `ties` roots of that millisecond were shown so far.
        case created(milliseconds: Int64, id: String, ties: Int)
        /// After the first `offset` roots.
        case offset(Int)
    }

    package var position: Position

    package init(_ position: Position) {
        self.position = position
    }

    /// The cursor as it travels in a URL: `c<ms>.<ties>.<id in base64url>` or `o<offset>`.
    package var description: String {
        switch position {
        case .created(let milliseconds, let id, let ties):
            let encoded = Data(id.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            return "c\(milliseconds).\(ties).\(encoded)"
        case .offset(let offset):
            return "o\(offset)"
        }
    }

    /// The cursor `text` names, or `nil` when it names none.
    package init?(_ text: String) {
        if text.hasPrefix("o"), let offset = Int(text.dropFirst()), offset >= 0 {
            self.init(.offset(offset))
            return
        }
        guard text.hasPrefix("c") else { return nil }
        let parts = text.dropFirst().split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let milliseconds = Int64(parts[0]), let ties = Int(parts[1]), ties >= 0 else { return nil }
        var base64 = parts[2].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64), let id = String(data: data, encoding: .utf8) else { return nil }
        self.init(.created(milliseconds: milliseconds, id: id, ties: ties))
    }
}

/// A page of roots and the cursor of the next one (`nil` on the last page).
package struct RootPage: Sendable {
    package var roots: [TaskRecord]
    package var next: RootCursor?
}

extension TaskStore {
    /// The page of roots matching `query` (its `limit` the page's size, its `offset` ignored) after `cursor`, or the
    /// first page.
    ///
    /// - Throws: ``CLIError`` when `cursor` is of another order than the query's; a store failure.
    package func page(_ query: TaskQuery, after cursor: RootCursor?) async throws -> RootPage {
        let size = max(0, query.limit)
        var request = query
        request.offset = 0
        guard query.sort == .created else {
            var offset = 0
            if let cursor {
                guard case .offset(let value) = cursor.position else {
                    throw CLIError.usage("the page cursor is of another order; start again from the first page")
                }
                offset = value
            }
            request.offset = offset
            request.limit = size + 1
            let rows = try await roots(request)
            return RootPage(
                roots: Array(rows.prefix(size)), next: rows.count > size ? RootCursor(.offset(offset + size)) : nil)
        }
        var shownAtEdge: (milliseconds: Int64, id: String, ties: Int)?
        if let cursor {
            guard case .created(let milliseconds, let id, let ties) = cursor.position else {
                throw CLIError.usage("the page cursor is of another order; start again from the first page")
            }
            shownAtEdge = (milliseconds, id, ties)
            // The edge's millisecond is read again (other roots of it may follow); the roots of it already shown are
            // left out below.
            if query.reverse {
                let bound = Date(storedMilliseconds: milliseconds)
                request.createdSince = max(request.createdSince ?? bound, bound)
            } else {
                let bound = Date(storedMilliseconds: milliseconds + 1)
                request.createdUntil = min(request.createdUntil ?? bound, bound)
            }
        }
        func wasShown(_ root: TaskRecord) -> Bool {
            guard let edge = shownAtEdge, root.createdAt.storedMilliseconds == edge.milliseconds else { return false }
            // Ids compare as the stores order them: by their UTF-8 bytes.
            let before = root.id.utf8.lexicographicallyPrecedes(edge.id.utf8)
            return query.reverse ? (before || root.id == edge.id) : !before
        }
        var extra = shownAtEdge?.ties ?? 0
        var kept: [TaskRecord]
        while true {
            request.limit = size + 1 + extra
            let rows = try await roots(request)
            kept = rows.filter { !wasShown($0) }
            // Enough, or all there is; else more roots of the edge's millisecond than the cursor counted.
            if kept.count > size || rows.count < request.limit { break }
            extra = extra * 2 + 16
        }
        let page = Array(kept.prefix(size))
        guard kept.count > size, let last = page.last else { return RootPage(roots: page, next: nil) }
        let edge = last.createdAt.storedMilliseconds
        var ties = page.filter { $0.createdAt.storedMilliseconds == edge }.count
        if let shownAtEdge, shownAtEdge.milliseconds == edge { ties += shownAtEdge.ties }
        return RootPage(roots: page, next: RootCursor(.created(milliseconds: edge, id: last.id, ties: ties)))
    }
}
