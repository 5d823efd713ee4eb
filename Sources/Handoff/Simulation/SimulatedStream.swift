import Foundation
import HandoffWire
import ZeroMQ

/// One continuation stream pair in the simulated world: the production machine (``StreamPair``)
/// at each end, and the applications around them — a writer that writes a known content as fast
/// as its credit allows, a reader that reads it promptly, slowly, with a long pause, or gives up,
/// and, for a hostile continuing node, a writer that ignores the credit it was granted.
final class SimulatedStream {
    /// How the reading application behaves.
    enum Reader: Equatable, CustomStringConvertible {
        case prompt
        /// Reads one chunk per `delay`.
        case slow(Duration)
        /// Stops reading at `atByte` for `pause` (longer than the idle timeout: keep-alives must
        /// keep the pair), then reads on.
        case pauses(atByte: Int, for: Duration)
        /// Cancels the stream once `atByte` bytes arrived.
        case cancels(atByte: Int)
        /// Stops reading once `atByte` bytes arrived, without a word (it leaves its loop): the
        /// node must cancel the pair (``StreamPair/readerStopped(after:now:)``), or the peer's
        /// writer waits for ever.
        case stops(atByte: Int)
        /// The application lets go of the pair once `atByte` bytes arrived, reading and writing no
        /// more (0: the originating application, as the pair opens): the node ends what it left
        /// (``StreamPair/applicationLetGo(readerTook:written:emptyEnd:now:)``).
        case letsGo(atByte: Int)

        /// A reader that gives up at `atByte`: half of them stop without a word, a quarter cancel,
        /// a quarter let go of the pair, half of those as it opens (which, from the byte drawn: a
        /// seed's other draws stay as they were, and so do the readers that stopped before
        /// applications let go, seed 9000155's among them).
        static func givesUp(atByte: Int) -> Reader {
            switch atByte % 4 {
            case 1, 3: .stops(atByte: atByte)
            case 2: .letsGo(atByte: atByte / 4 % 2 == 0 ? 0 : atByte)
            default: .cancels(atByte: atByte)
            }
        }

        /// Whether the application stops reading before the end (the peer may be given up on, or
        /// give up, for it).
        var stopsReading: Bool {
            switch self {
            case .stops, .letsGo: true
            default: false
            }
        }

        var description: String {
            switch self {
            case .prompt: "a prompt reader"
            case .slow(let delay): "a slow reader (a chunk per \(delay))"
            case .pauses(let at, let pause): "a reader pausing at byte \(at) for \(pause)"
            case .cancels(let at): "a reader cancelling at byte \(at)"
            case .stops(let at): "a reader stopping at byte \(at)"
            case .letsGo(0): "an originating application letting go of the pair as it opens"
            case .letsGo(let at): "an application letting go of the pair at byte \(at)"
            }
        }
    }

    /// How a hostile originating node lies about what it writes.
    enum Lie: CaseIterable, CustomStringConvertible {
        /// One byte of one chunk is not what it wrote (the end's checksum is of what it wrote).
        case corruptsAChunk
        /// The end's checksum is not the content's.
        case wrongChecksum
        /// The end claims a byte fewer than it wrote, or a byte more.
        case shortLength
        case longLength

        var description: String {
            switch self {
            case .corruptsAChunk: "changes a byte of a chunk"
            case .wrongChecksum: "sends a wrong checksum at the end"
            case .shortLength: "claims a byte fewer at the end"
            case .longLength: "claims a byte more at the end"
            }
        }
    }

    enum Side: Int, CaseIterable, CustomStringConvertible {
        case continuer = 0, origin = 1
        var other: Side { self == .continuer ? .origin : .continuer }
        var description: String { self == .continuer ? "continuing" : "originating" }
    }

    /// One end: its node's process, the machine, and its applications' progress.
    ///
    /// A class: the world reads and sets an end's fields through ``SimulatedStream/subscript(_:)``
    /// at every frame, read and write, and as a value each of those copied the whole end (its
    /// machine's buffers, its reader's bytes, a dozen references) out and back in.
    final class End {
        let node: Int
        /// The node's process the end lives in: a restarted node has none of its old pairs.
        let incarnation: Int
        var pair: StreamPair
        /// Bytes the writer wrote (the stream's content from its start); whether it wrote the end.
        var written = 0
        var endWritten = false
        /// What the reader received in order, checksummed in the algorithm the peer's open announced
        /// (set when the open is accepted or answered, as the node sets its reader's).
        var read = ReceivedBytes()
        var received: Int { Int(read.count) }
        /// Chunks delivered and not yet read; chunks read and not yet granted back.
        var held = 0
        var ungranted = 0
        var readScheduled = false
        /// Until when the reader pauses (``Reader/pauses(atByte:for:)``), once it reached the byte.
        var pausedUntil: Duration?
        /// The reader saw the end, verified.
        var readWhole = false
        /// The application let go of the pair (``Reader/letsGo(atByte:)``): it reads and writes no more.
        var letGo = false
        /// It let go before writing anything: its direction ended as an empty stream.
        var wroteEmpty = false
        /// The pair completed (both halves), or failed with this.
        var completed = false
        var failure: HandoffError?

        var finished: Bool { completed || failure != nil }

        init(node: Int, incarnation: Int, pair: StreamPair) {
            self.node = node
            self.incarnation = incarnation
            self.pair = pair
        }
    }

    let number: Int
    let activityID: String
    let direction: WireStreamDirection
    /// Bytes each writing end writes.
    let bytes: Int
    let reader: Reader
    /// The continuing node floods: it sends three windows of chunks at once, ignoring the credit.
    let floods: Bool
    /// The originating node lies about what it writes (a hostile originator); `nil`: honest.
    let lie: Lie?
    /// Both ends give up on a peer that makes no progress for this long (``StreamLiveness/Limits/stallTimeout``);
    /// `nil`: they wait as long as it is heard.
    let stallTimeout: Duration?
    /// The writing applications get stuck half way: they write half the content, then nothing,
    /// and never end (only with a stall timeout, which must end the pair on both sides).
    let stuck: Bool
    /// A chunk was changed on its way (``Lie/corruptsAChunk``: the first only).
    private(set) var chunkChanged = false
    /// A reader got bytes the writer did not write there (a lie's, to be caught at the end).
    var liedBytesRead = false
    /// The continuing side's reader caught the lie (a typed error at the end).
    var lieCaught = false
    let openedAt: Duration
    var ends: [End?]

    /// What was wrong with the bytes a reader got (the invariant "stream-bytes-exact" reports it).
    var corrupted: String?

    /// The sim's stream settings: small chunks and windows so that a run sees many of them, and a
    /// short idle timeout and resume window so that a 60-second run sees pairs interrupted,
    /// resumed and lost.
    static let settings = (chunkSize: 1_024, idleTimeout: Duration.seconds(2), resumeWindow: Duration.seconds(8))

    /// The stall timeout of the streams that have one: past the longest pause of a reader
    /// (``Reader/pauses(atByte:for:)``, at most 12 s), which a writer waits out.
    static let stallTimeout = Duration.seconds(15)

    /// The rules' limits for this stream's ends.
    var limits: StreamLiveness.Limits {
        StreamLiveness.Limits(idleTimeout: Self.settings.idleTimeout, resumeWindow: Self.settings.resumeWindow, stallTimeout: stallTimeout)
    }

    /// How many bytes each writing application writes before it ends (or, stuck, stops).
    var bytesToWrite: Int { stuck ? bytes / 2 : bytes }

    init(
        number: Int, activityID: String, direction: WireStreamDirection, bytes: Int, reader: Reader, floods: Bool, lie: Lie?,
        stallTimeout: Duration? = nil, stuck: Bool = false, openedAt: Duration, continuer: End
    ) {
        self.stallTimeout = stallTimeout
        self.stuck = stuck
        self.number = number
        self.activityID = activityID
        self.direction = direction
        self.bytes = bytes
        self.reader = reader
        self.floods = floods
        self.lie = lie
        self.openedAt = openedAt
        ends = [continuer, nil]
    }

    subscript(side: Side) -> End? {
        get { ends[side.rawValue] }
        set { ends[side.rawValue] = newValue }
    }

    /// Runs `body` on an end, `nil` when it has none.
    func endDo<T>(_ side: Side, _ body: (End) -> T) -> T? {
        ends[side.rawValue].map(body)
    }

    /// Runs `body` on an end's machine (there must be one), in place. Read through the end's
    /// reference instead (`end.pair.isLive`), a computed property of the machine was given a copy
    /// of it (its buffers, a dozen references), a tenth of the simulator's time in the invariants.
    func pairDo<T>(_ side: Side, _ body: (inout StreamPair) -> T) -> T {
        body(&ends[side.rawValue]!.pair)
    }

    /// A frame of the originating end as its lie makes it (the frame as it is when it tells none).
    func lying(_ kind: WireStreamFrame.OneOf_Kind, payload: Frame?) -> (WireStreamFrame.OneOf_Kind, Frame?) {
        switch (lie, kind) {
        case (.corruptsAChunk, .data):
            guard !chunkChanged, let payload, payload.count > 0 else { return (kind, payload) }
            chunkChanged = true
            var bytes = payload.bytes
            bytes[bytes.count / 2] ^= 0x5A
            return (kind, Frame(bytes))
        case (.wrongChecksum, .end(var end)) where !end.checksum.isEmpty:
            end.checksum[end.checksum.count - 1] ^= 0x01
            return (.end(end), payload)
        case (.shortLength, .end(var end)) where end.totalLength > 0:
            end.totalLength -= 1
            return (.end(end), payload)
        case (.longLength, .end(var end)):
            end.totalLength += 1
            return (.end(end), payload)
        default:
            return (kind, payload)
        }
    }

    /// The content every writer of this stream writes: byte `offset` of it.
    func byte(at offset: Int) -> UInt8 {
        UInt8(truncatingIfNeeded: (offset &* 131) ^ (offset >> 7) &+ number &* 17)
    }

    /// The whole content, made once: chunks and checksums are cut from it (made a byte at a time
    /// for each chunk, it was a tenth of a debug run's time).
    private lazy var wholeContent: [UInt8] = (0..<bytes).map(byte(at:))

    func content(_ range: Range<Int>) -> [UInt8] {
        range.upperBound <= bytes ? Array(wholeContent[range]) : range.map(byte(at:))
    }

    /// The checksum each side's writer ends with, from the stream's number (no new draw): every
    /// algorithm of the contract, at either end, against each other.
    func checksumAlgorithm(writtenBy side: Side) -> StreamChecksum {
        let all = StreamChecksum.allCases
        return side == .continuer ? all[number % all.count] : all[number / all.count % all.count]
    }

    /// The checksum of the whole content as `side`'s writer's end carries it (`empty`: of no bytes,
    /// as an application that let go before writing ends its direction).
    func checksum(writtenBy side: Side, empty: Bool = false) -> StreamEndChecksum {
        var all = ReceivedBytes(checksum: checksumAlgorithm(writtenBy: side))
        if !empty { all.absorb(Data(wholeContent)) }
        return all.checksum!
    }
}
