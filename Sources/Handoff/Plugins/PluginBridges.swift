import CHandoffPlugin
import Dispatch
import Foundation
import HandoffWire
import Logging
import Synchronization
import SwiftProtobuf
import ZeroMQ

// MARK: - Blocking bridges for C

/// Runs async work from a plugin's (non-cooperative) thread and waits for it.
func waitFor<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) -> Result<T, any Error> {
    let result = Mutex<Result<T, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    // On the loops, as the node's own tasks (an unstructured task does not inherit them): the work
    // calls into the node, and the thread waiting here is a plugin worker's, never a loop.
    Task(executorPreference: EventLoops.shared) {
        let outcome: Result<T, any Error>
        do { outcome = .success(try await work()) } catch { outcome = .failure(error) }
        result.withLock { $0 = outcome }
        done.signal()
    }
    done.wait()
    return result.withLock { $0! }
}

func write(_ message: String, to buffer: handoff_error_buffer) {
    handoff_error_set(buffer, message)
}

/// The status a host function returns for `error` (docs/plugin-abi.md, "Status codes"): bytes
/// that do not decode, a type the plugin did not declare, or an activity the node would not take
/// as it is, `HANDOFF_INVALID_ARGUMENT`; no such activity, `HANDOFF_NOT_FOUND`; else `HANDOFF_FAILED`.
func pluginStatus(of error: any Error) -> Int32 {
    let status: handoff_status
    if error is BinaryDecodingError {
        status = HANDOFF_INVALID_ARGUMENT
    } else if let error = error as? HandoffError {
        switch error.code {
        case .activityNotFound: status = HANDOFF_NOT_FOUND
        case .invalidActivityType, .malformedMessage, .invalidConfiguration, .userInfoTooLarge, .missingRequiredUserInfoKey:
            status = HANDOFF_INVALID_ARGUMENT
        default: status = HANDOFF_FAILED
        }
    } else {
        status = HANDOFF_FAILED
    }
    return Int32(status.rawValue)
}

func hostContext(_ pointer: UnsafeMutableRawPointer?) -> PluginHostContext {
    Unmanaged<PluginHostContext>.fromOpaque(pointer!).takeUnretainedValue()
}

let hostLog: @convention(c) (UnsafeMutableRawPointer?, handoff_log_level, UnsafePointer<CChar>?) -> Void = { pointer, level, message in
    let host = hostContext(pointer)
    let text = message.map { String(cString: $0) } ?? ""
    let logLevel: Logger.Level = switch level {
    case HANDOFF_LOG_DEBUG: .debug
    case HANDOFF_LOG_WARNING: .warning
    case HANDOFF_LOG_ERROR: .error
    default: .info
    }
    host.runtime.logger.log(level: logLevel, "\(text)", metadata: ["plugin": "\(host.plugin.name)"])
}

let hostBecomeCurrent: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<UInt8>?, Int, UnsafeMutablePointer<CChar>?, Int, handoff_error_buffer) -> Int32 = { pointer, bytes, length, idOut, capacity, error in
    let host = hostContext(pointer)
    let activity = Array(UnsafeBufferPointer(start: bytes, count: length))
    switch waitFor({ try await host.becomeCurrent(activity) }) {
    case .success(let id):
        if let idOut, capacity > id.utf8.count {
            write(id, to: handoff_error_buffer(message: idOut, capacity: capacity))
        }
        return Int32(HANDOFF_OK.rawValue)
    case .failure(let failure):
        write("\(failure)", to: error)
        return pluginStatus(of: failure)
    }
}

let hostUpdateActivity: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<UInt8>?, Int, handoff_error_buffer) -> Int32 = { pointer, bytes, length, buffer in
    let host = hostContext(pointer)
    do {
        try host.update(Array(UnsafeBufferPointer(start: bytes, count: length)))
        return Int32(HANDOFF_OK.rawValue)
    } catch {
        write("\(error)", to: buffer)
        return pluginStatus(of: error)
    }
}

let hostEndActivity: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?, Int32) -> Int32 = { pointer, id, invalidate in
    let host = hostContext(pointer)
    let activityID = id.map { String(cString: $0) } ?? ""
    let ended = (try? waitFor({ await host.end(activityID, invalidate: invalidate != 0) }).get()) ?? false
    return Int32(ended ? HANDOFF_OK.rawValue : HANDOFF_NOT_FOUND.rawValue)
}

/// Collects a command's output lines.
final class LineCollector: @unchecked Sendable {
    // Invariant: `collected` is only touched under `lock`.
    private let lock = NSLock()
    private var collected: [String] = []
    var lines: [String] { lock.withLock { collected } }

    var table: handoff_output {
        handoff_output(context: Unmanaged.passUnretained(self).toOpaque()) { pointer, text in
            let collector = Unmanaged<LineCollector>.fromOpaque(pointer!).takeUnretainedValue()
            let line = text.map { String(cString: $0) } ?? ""
            collector.lock.withLock { collector.collected.append(line) }
        }
    }
}

/// A `handoff_stream_writer` over a continuation stream's output: write blocks the plugin's thread
/// until the bytes are accepted (flow control).
final class StreamWriterBridge: @unchecked Sendable {
    // Invariant: `output` is Sendable; the bridge only forwards to it.
    let output: ContinuationOutputStream
    init(_ output: ContinuationOutputStream) { self.output = output }

    var table: handoff_stream_writer {
        handoff_stream_writer(
            context: Unmanaged.passUnretained(self).toOpaque(),
            write: { pointer, bytes, length in
                let bridge = Unmanaged<StreamWriterBridge>.fromOpaque(pointer!).takeUnretainedValue()
                // No copy of the plugin's buffer: this call blocks until every byte was taken.
                let borrowed = BorrowedBytes(UnsafeRawBufferPointer(start: bytes, count: length))
                let output = bridge.output
                switch waitFor({ try await output.write(borrowed.buffer) }) {
                case .success: return Int32(HANDOFF_OK.rawValue)
                case .failure: return Int32(HANDOFF_STREAM_FAILED.rawValue)
                }
            },
            set_expected_length: { pointer, length in
                Unmanaged<StreamWriterBridge>.fromOpaque(pointer!).takeUnretainedValue().output.expectedLength = length
            })
    }
}

/// A plugin's buffer, lent to the host for the duration of a blocking call.
struct BorrowedBytes: @unchecked Sendable {
    // Invariant for @unchecked Sendable: used only while the plugin's call that lent it blocks.
    let buffer: UnsafeRawBufferPointer
    init(_ buffer: UnsafeRawBufferPointer) { self.buffer = buffer }
}

/// A `handoff_stream_reader` over a continuation stream's input. A task pumps chunks into a small
/// queue; read blocks the plugin's thread on it. The queue holds at most a few chunks, so the
/// stream's flow control still bounds memory.
final class StreamReaderBridge: @unchecked Sendable {
    // Invariant: `items`, `current`, `waitingProducer`, `firstArrival` are only touched with `condition` locked.
    enum Item { case chunk(Data), end, failed(String) }
    private let condition = NSCondition()
    private var items: [Item] = []
    private var current = Data()
    /// The pump, waiting for room: resumed with `true` when there is, `false` when the bridge closed.
    private var waitingProducer: CheckedContinuation<Bool, Never>?
    /// Waiting in ``untilSomethingArrives()`` for the first item.
    private var firstArrival: CheckedContinuation<Void, Never>?
    private var closed = false
    private var reachedEnd = false
    private let capacity = 4
    private let input: ContinuationInputStream

    init(_ input: ContinuationInputStream) {
        self.input = input
        Task(executorPreference: EventLoops.shared) { [self] in
            do throws(HandoffError) {
                for try await chunk in input {
                    guard await put(.chunk(chunk)) else { return }
                }
                _ = await put(.end)
            } catch {
                _ = await put(.failed(error.description))
            }
        }
    }

    /// The plugin's read handler returned: stop pumping, and cancel the stream if it was not read to
    /// the end (so the writer on the other side stops instead of waiting for credit).
    func close() async {
        let (producer, complete): (CheckedContinuation<Bool, Never>?, Bool) = {
            condition.lock()
            defer { condition.unlock() }
            closed = true
            items.removeAll()
            defer { waitingProducer = nil }
            return (waitingProducer, reachedEnd)
        }()
        producer?.resume(returning: false)
        if !complete { await input.node.cancelStream(input.key, reason: "the plugin stopped reading before the end") }
    }

    /// Returns once the first chunk, the end, or a failure has arrived.
    func untilSomethingArrives() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            condition.lock()
            if items.isEmpty && !closed {
                firstArrival = continuation
                condition.unlock()
            } else {
                condition.unlock()
                continuation.resume()
            }
        }
    }

    /// Queues an item for the reader; `false` once the bridge is closed.
    private func put(_ item: Item) async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            condition.lock()
            guard !closed else {
                condition.unlock()
                continuation.resume(returning: false)
                return
            }
            items.append(item)
            if let waiter = firstArrival {
                firstArrival = nil
                waiter.resume()
            }
            condition.signal()
            if items.count >= capacity {
                // Resumed by read() when space frees, or by close().
                waitingProducer = continuation
                condition.unlock()
            } else {
                condition.unlock()
                continuation.resume(returning: true)
            }
        }
    }

    /// Copies up to `capacity` bytes into `buffer`; 0 at the verified end; -1 on failure.
    func read(into buffer: UnsafeMutablePointer<UInt8>, capacity: Int, error: handoff_error_buffer) -> Int64 {
        condition.lock()
        defer { condition.unlock() }
        while current.isEmpty {
            while items.isEmpty { condition.wait() }
            let item = items.removeFirst()
            if let producer = waitingProducer, items.count < self.capacity {
                waitingProducer = nil
                producer.resume(returning: true)
            }
            switch item {
            case .chunk(let chunk): current = chunk
            case .end:
                items.insert(.end, at: 0)
                reachedEnd = true
                return 0
            case .failed(let message):
                items.insert(.failed(message), at: 0)
                write(message, to: error)
                return -1
            }
        }
        let count = min(capacity, current.count)
        current.copyBytes(to: buffer, count: count)
        current = current.dropFirst(count)
        if current.isEmpty { current = Data() }
        return Int64(count)
    }

    var table: handoff_stream_reader {
        handoff_stream_reader(context: Unmanaged.passUnretained(self).toOpaque()) { pointer, buffer, capacity, error in
            Unmanaged<StreamReaderBridge>.fromOpaque(pointer!).takeUnretainedValue().read(into: buffer!, capacity: capacity, error: error)
        }
    }
}
