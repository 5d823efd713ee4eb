import Foundation

/// Discovery's watchers: who follows which activities (each ``Node/discover(_:)`` stream), and how
/// many follow each bus topic, so that the node subscribes to a type prefix once, with its
/// first follower, and unsubscribes with its last.
///
/// Generic over where events go, so that it is tested without streams or sockets.
struct Watchers<Sink> {
    private var watchers: [UUID: (filter: ActivityFilter, sink: Sink)] = [:]
    private var followers: [String: Int] = [:]

    var count: Int { watchers.count }

    /// The topics someone follows.
    var topics: Dictionary<String, Int>.Keys { followers.keys }

    /// Follows `topic` once more. Returns whether this is its first follower: the node then
    /// subscribes to it and asks for its snapshot.
    mutating func follow(_ topic: String) -> Bool {
        followers[topic, default: 0] += 1
        return followers[topic] == 1
    }

    /// Follows `topic` once less. Returns whether that was its last follower: the node then
    /// unsubscribes and ends the snapshots it asked for.
    mutating func unfollow(_ topic: String) -> Bool {
        guard let count = followers[topic] else { return false }
        if count > 1 {
            followers[topic] = count - 1
            return false
        }
        followers[topic] = nil
        return true
    }

    /// Adds a watcher. Returns the topics it follows first (``follow(_:)``).
    mutating func add(_ id: UUID, filter: ActivityFilter, sink: Sink) -> [String] {
        watchers[id] = (filter, sink)
        return filter.topics.filter { follow($0) }
    }

    /// Removes a watcher. Returns the topics nobody follows any more (``unfollow(_:)``).
    mutating func remove(_ id: UUID) -> [String] {
        guard let watcher = watchers.removeValue(forKey: id) else { return [] }
        return watcher.filter.topics.filter { unfollow($0) }
    }

    /// Where an event about `activity` goes: every watcher whose filter matches it.
    func sinks(for activity: DiscoveredActivity) -> [Sink] {
        var sinks: [Sink] = []
        forEachSink(for: activity) { _, sink in sinks.append(sink) }
        return sinks
    }

    /// Calls `body` with each watcher's id and sink whose filter matches `activity`: what the node
    /// does for every event, with no array made per event.
    func forEachSink(for activity: DiscoveredActivity, _ body: (UUID, Sink) -> Void) {
        for (id, watcher) in watchers where watcher.filter.matches(activity) { body(id, watcher.sink) }
    }

    /// The sink of watcher `id`, if it watches.
    func sink(of id: UUID) -> Sink? { watchers[id]?.sink }

    /// Removes every watcher (the node stops) and returns where their events went, to end them.
    mutating func removeAll() -> [Sink] {
        defer { watchers.removeAll() }
        return watchers.values.map(\.sink)
    }
}
