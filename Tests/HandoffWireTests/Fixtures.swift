import Foundation
import HandoffWire
import SwiftProtobuf

/// Realistic sample messages shared by the tests.
enum Fixtures {
    static let node: WireNodeRef = {
        var node = WireNodeRef()
        node.nodeID = "6F9619FF-8B86-D011-B42D-00C04FC964FF"
        node.name = "editor on build-box"
        node.host = "build-box.local"
        return node
    }()

    static let sentAt = Date(timeIntervalSince1970: 1_763_700_000.125)

    static func value(_ kind: WireValue.OneOf_Kind) -> WireValue {
        var value = WireValue()
        value.kind = kind
        return value
    }

    /// An activity whose user_info holds every WireValue kind, including a list inside a map
    /// inside a list.
    static let activity: WireActivity = {
        var activity = WireActivity()
        activity.activityID = "0F3E2D1C-4B5A-4978-8A6B-5C4D3E2F1A0B"
        activity.activityType = "com.example.editor.editing-document"
        activity.title = "Editing notes.txt"
        var inner = WireValueMap()
        inner.entries = [
            "tags": value(.listValue(WireValueList.with { $0.values = [value(.stringValue("a")), value(.stringValue("b"))] })),
            "pinned": value(.boolValue(false)),
        ]
        activity.userInfo = [
            "path": value(.stringValue("/home/ada/notes.txt ✍️")),
            "cursor": value(.intValue(-1_234_567_890_123)),
            "zoom": value(.doubleValue(1.25)),
            "dirty": value(.boolValue(true)),
            "digest": value(.bytesValue(Data([0x00, 0xFF, 0x10, 0x80]))),
            "source": value(.urlValue("https://example.com/notes/42?x=1")),
            "opened": value(.dateValue(WireTimestamp(Date(timeIntervalSince1970: 1_700_000_000.5)))),
            "history": value(.listValue(WireValueList.with {
                $0.values = [value(.intValue(1)), value(.mapValue(inner)), value(.listValue(WireValueList()))]
            })),
            "meta": value(.mapValue(inner)),
            "null": WireValue(),
        ]
        activity.requiredUserInfoKeys = ["path", "cursor"]
        activity.webpageURL = "https://example.com/notes/42"
        activity.expiration = WireTimestamp(Date(timeIntervalSince1970: 1_763_703_600))
        activity.keywords = ["notes", "editor"]
        activity.supportsContinuationStreams = true
        activity.eligibleForHandoff = true
        activity.teamID = "ABCDE12345"
        activity.origin = node
        activity.version = 7
        activity.updatedAt = WireTimestamp(sentAt)
        return activity
    }()

    /// The advertisement the origin of ``activity`` publishes on the bus.
    static let advertisement: WireAdvertisement = {
        var ad = WireAdvertisement()
        ad.activityID = activity.activityID
        ad.activityType = activity.activityType
        ad.title = activity.title
        ad.origin = activity.origin
        ad.continueEndpoint = "tcp://192.168.178.23:5571"
        ad.version = activity.version
        ad.expiresAt = activity.expiration
        ad.leaseMs = 30_000
        ad.supportsContinuationStreams = activity.supportsContinuationStreams
        ad.teamID = activity.teamID
        ad.webpageURL = activity.webpageURL
        ad.keywords = activity.keywords
        return ad
    }()

    static func envelope(_ body: WireEnvelope.OneOf_Body, correlationID: UInt64 = 0) -> WireEnvelope {
        WireEnvelope(body: body, sender: node, sequence: 42, correlationID: correlationID, sentAt: sentAt)
    }

    static func error(_ code: WireErrorCode) -> WireError {
        var error = WireError()
        error.code = code
        error.message = "something went wrong"
        error.details = ["activity_id": activity.activityID]
        return error
    }

    /// One frame of every StreamFrame kind.
    static let streamFrames: [WireStreamFrame] = {
        func frame(_ kind: WireStreamFrame.OneOf_Kind) -> WireStreamFrame {
            var frame = WireStreamFrame()
            frame.streamID = 9
            frame.kind = kind
            return frame
        }
        return [
            frame(.open(WireStreamOpen.with {
                $0.activityID = activity.activityID
                $0.direction = .originToContinuer
                $0.chunkSize = 64 * 1024
                $0.window = 8
                $0.expectedLength = 1_000_000
                $0.resumeToken = Data(repeating: 0xA5, count: 16)
            })),
            frame(.data(WireStreamData.with {
                $0.offset = 65_536
                $0.payload = Data((0..<200).map { UInt8($0) })
            })),
            frame(.credit(WireStreamCredit.with {
                $0.chunks = 4
                $0.acknowledgedOffset = 131_072
                $0.endReceived = true
            })),
            frame(.end(WireStreamEnd.with {
                $0.totalLength = 1_000_000
                $0.checksumAlgorithm = .crc32C
                $0.checksum = Data([0xDE, 0xAD, 0xBE, 0xEF])
            })),
            frame(.cancel(WireStreamCancel.with { $0.reason = "user closed the window" })),
            frame(.error(error(.streamChecksumMismatch))),
            frame(.resume(WireStreamResume.with {
                $0.resumeToken = Data(repeating: 0xA5, count: 16)
                $0.receivedOffset = 3 << 20
                $0.window = 12
                $0.endReceived = false
            })),
        ]
    }()

    /// One envelope body of every kind.
    static let bodies: [WireEnvelope.OneOf_Body] = [
        .advertisement(advertisement),
        .withdrawal(WireWithdrawal.with {
            $0.activityID = activity.activityID
            $0.activityType = activity.activityType
            $0.origin = node
            $0.reason = .nodeShutdown
        }),
        .nodePresence(WireNodePresence.with {
            $0.node = node
            $0.continueEndpoint = advertisement.continueEndpoint
            $0.leaseMs = 15_000
            $0.activityIds = [activity.activityID, "7A1B2C3D-0000-4000-8000-000000000001"]
        }),
        .streamFrame(streamFrames[1]),
        .continueRequest(WireContinueRequest.with {
            $0.activityID = activity.activityID
            $0.activityType = activity.activityType
            $0.wantStreams = true
        }),
        .continueReply(WireContinueReply.with { $0.activity = activity }),
        .continueReply(WireContinueReply.with { $0.error = error(.activityExpired) }),
        .snapshotReply(WireSnapshotReply.with {
            $0.count = 2
            $0.typePrefix = "com.example."
        }),
        .error(error(.unauthorized)),
        .nodeEvent(WireNodeEvent.with {
            $0.kind = .streamProgress
            $0.activityID = activity.activityID
            $0.activityType = activity.activityType
            $0.peer = node
            $0.streamID = 7
            $0.bytesSent = 1 << 20
            $0.bytesReceived = 3 << 20
            $0.expectedLength = 8 << 20
            $0.detail = "halfway"
        }),
        .traceHop(WireTraceHop.with {
            $0.traceID = "0123456789abcdef0123456789abcdef"
            $0.kind = .delivered
            $0.activityID = activity.activityID
            $0.at = WireTimestamp(Date(timeIntervalSince1970: 1_790_000_000))
            $0.detail = "discovered"
        }),
    ]

    /// A stable name for each body case (exhaustive: adding a case breaks the build here).
    static func caseName(_ body: WireEnvelope.OneOf_Body) -> String {
        switch body {
        case .advertisement: "advertisement"
        case .withdrawal: "withdrawal"
        case .nodePresence: "nodePresence"
        case .streamFrame: "streamFrame"
        case .continueRequest: "continueRequest"
        case .continueReply: "continueReply"
        case .snapshotReply: "snapshotReply"
        case .error: "error"
        case .nodeEvent: "nodeEvent"
        case .traceHop: "traceHop"
        }
    }

    static func caseName(_ kind: WireStreamFrame.OneOf_Kind) -> String {
        switch kind {
        case .open: "open"
        case .data: "data"
        case .credit: "credit"
        case .end: "end"
        case .cancel: "cancel"
        case .error: "error"
        case .resume: "resume"
        }
    }

    static func caseName(_ kind: WireValue.OneOf_Kind) -> String {
        switch kind {
        case .stringValue: "string"
        case .intValue: "int"
        case .doubleValue: "double"
        case .boolValue: "bool"
        case .bytesValue: "bytes"
        case .urlValue: "url"
        case .dateValue: "date"
        case .listValue: "list"
        case .mapValue: "map"
        }
    }

    /// Names of every value kind reachable from `values`, recursing into lists and maps.
    static func kinds(in values: some Sequence<WireValue>) -> Set<String> {
        var kinds: Set<String> = []
        for value in values {
            guard let kind = value.kind else { continue }
            kinds.insert(caseName(kind))
            switch kind {
            case .listValue(let list): kinds.formUnion(Self.kinds(in: list.values))
            case .mapValue(let map): kinds.formUnion(Self.kinds(in: map.entries.values))
            default: break
            }
        }
        return kinds
    }
}

extension Message {
    /// Binary-encodes and decodes again.
    func roundTripped() throws -> Self {
        let bytes: [UInt8] = try serializedBytes()
        return try Self(serializedBytes: bytes)
    }
}
