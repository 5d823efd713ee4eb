import Foundation
import HandoffWire

// What a follower reads of an advertisement of either form (`WireAdvertisementFields`): the
// generated `WireAdvertisement` (a snapshot's, a traced message's, the simulator's) or the plain
// one a node reads most advertisements into. The code that judges and keeps one is written once.
extension WireAdvertisementFields {
    /// The origin it names; empty when it names none.
    var originNode: WireNodeRef { originIfSet ?? WireNodeRef() }
    var expirationDate: Date? { expiresAtIfSet?.date }
    var updatedAtDate: Date? { updatedAtIfSet?.date }
}
