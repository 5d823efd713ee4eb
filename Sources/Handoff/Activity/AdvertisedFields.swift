import Foundation
import HandoffWire

// An advertisement's times as dates, of either form (`WireAdvertisementFields`): the generated
// `WireAdvertisement` or the plain one a follower reads every advertisement into (the generated
// form copied into it first) and a `DiscoveredActivity` takes its strings from.
extension WireAdvertisementFields {
    var expirationDate: Date? { expiresAtIfSet?.date }
    var updatedAtDate: Date? { updatedAtIfSet?.date }
}
