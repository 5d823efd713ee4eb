import Foundation
import HandoffWire
import ZeroMQ

extension BrokerLoop {
    /// A traced message's hops here (wire.proto, "Tracing"): received, cached, forwarded, each
    /// under the trace's topic, to the subscribers (the tracer).
    /// With sites, the hops go to the sites below and upstream too, so that a tracer at another
    /// site hears them (as it hears any bus message it follows).
    func reportHops(_ trace: BrokerCore.Trace, received: Date, forwarded: Date) throws(ZMQError) {
        let topic = Frame(Topic.trace(trace.traceID))
        var hops = [Frame(core.traceHop(.brokerReceived, trace, at: received))]
        if trace.cached { hops.append(Frame(core.traceHop(.brokerCached, trace, at: received))) }
        hops.append(Frame(core.traceHop(.brokerForwarded, trace, at: forwarded)))
        for hop in hops {
            try send([topic, hop], to: backend)
            try sendToSites([topic, hop], hop: localHop, excluding: nil)
            for link in upstreamLinks { try send([topic, hop, localHop], to: link.up) }
        }
    }
}
