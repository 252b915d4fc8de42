package dev.compute.boot;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;

/**
 * The starter's relay calls every listener attached to it (the meters, an application's own) as one listener of the
 * manager: the manager guards the relay, not each listener behind it. A listener attached first that throws (an
 * assertion in a test, a failing metrics call) keeps the event from every listener attached after it, the meters
 * among them, so their figures miss it.
 */
class RelayListenerFailuresTests {

    @Test
    void aListenerThatThrowsKeepsNoEventFromTheListenersAttachedAfterIt() throws Exception {
        MemoryEventRelays.Relay relay = new MemoryEventRelays.Relay();
        List<String> heard = new CopyOnWriteArrayList<>();
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                .timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO).eventListener(relay).build();
             AutoCloseable failing = relay.attach(new MemoryEventListener() {
                 @Override
                 public void backendAllocated(MemoryLocation location, long bytes, long nanos) {
                     throw new AssertionError("an application's listener fails");
                 }
             });
             AutoCloseable meters = relay.attach(new MemoryEventListener() {
                 @Override
                 public void backendAllocated(MemoryLocation location, long bytes, long nanos) {
                     heard.add("allocated " + location);
                 }
             })) {
            manager.allocate(1 << 20, MemoryLocation.DEVICE).close();
            assertThat(heard).as("what the listener attached after the failing one heard").containsExactly("allocated DEVICE");
        }
    }
}
