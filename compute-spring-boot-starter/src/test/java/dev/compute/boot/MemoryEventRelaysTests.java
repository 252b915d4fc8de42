package dev.compute.boot;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.OutOfMemoryReason;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.lang.reflect.Method;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Test;

class MemoryEventRelaysTests {

    @Test
    void aRelayPassesEveryEventToTheListenersAttachedNow() throws Exception {
        MemoryEventRelays.Relay relay = new MemoryEventRelays.Relay();
        List<String> heard = new CopyOnWriteArrayList<>();
        AutoCloseable attached = relay.attach(new Recorder(heard));
        relay.backendAllocated(MemoryLocation.DEVICE, 1, 2);
        relay.backendFreed(MemoryLocation.DEVICE, 1, 3);
        relay.outOfMemoryRecovery(MemoryLocation.HOST, 4, MemoryEventListener.RecoveryOutcome.RECOVERED, 5);
        relay.allocationFailed(MemoryLocation.HOST, 6, OutOfMemoryReason.POOL_LIMIT);
        relay.trimmed(MemoryLocation.PINNED, 7);
        relay.leakDetected(MemoryLocation.UNIFIED, 8, null);
        relay.snapshotRead(MemoryLocation.DEVICE, 11, 2, 12, 13);
        attached.close();
        relay.backendAllocated(MemoryLocation.DEVICE, 9, 10);
        assertThat(heard).containsExactly("allocated DEVICE 1 2", "freed DEVICE 1 3", "recovery HOST 4 RECOVERED 5", "failed HOST 6 POOL_LIMIT",
                "trimmed PINNED 7", "leak UNIFIED 8 null", "snapshot DEVICE 11 2 12 13");
    }

    @Test
    void theRelayPassesOnEveryMethodOfTheListenerInterface() {
        for (Method method : MemoryEventListener.class.getMethods()) {
            assertThat(Arrays.stream(MemoryEventRelays.Relay.class.getDeclaredMethods())
                    .anyMatch(own -> own.getName().equals(method.getName()) && Arrays.equals(own.getParameterTypes(), method.getParameterTypes())))
                    .as("the relay passes on %s", method.getName()).isTrue();
        }
    }

    @Test
    void aManagerTheStarterDidNotBuildHasNoRelay() {
        try (UnifiedMemoryManager own = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).build()) {
            MemoryEventRelays relays = new MemoryEventRelays();
            assertThat(relays.of(own)).isEmpty();
            MemoryEventRelays.Relay relay = new MemoryEventRelays.Relay();
            relays.register(own, relay);
            assertThat(relays.of(own)).containsSame(relay);
        }
    }

    private record Recorder(List<String> heard) implements MemoryEventListener {
        @Override
        public void backendAllocated(MemoryLocation location, long bytes, long nanos) {
            heard.add("allocated " + location + " " + bytes + " " + nanos);
        }

        @Override
        public void backendFreed(MemoryLocation location, long bytes, long nanos) {
            heard.add("freed " + location + " " + bytes + " " + nanos);
        }

        @Override
        public void outOfMemoryRecovery(MemoryLocation location, long requestedBytes, RecoveryOutcome outcome, long nanos) {
            heard.add("recovery " + location + " " + requestedBytes + " " + outcome + " " + nanos);
        }

        @Override
        public void allocationFailed(MemoryLocation location, long requestedBytes, OutOfMemoryReason reason) {
            heard.add("failed " + location + " " + requestedBytes + " " + reason);
        }

        @Override
        public void trimmed(MemoryLocation location, long releasedBytes) {
            heard.add("trimmed " + location + " " + releasedBytes);
        }

        @Override
        public void leakDetected(MemoryLocation location, long bytes, @Nullable String allocationSite) {
            heard.add("leak " + location + " " + bytes + " " + allocationSite);
        }

        @Override
        public void snapshotRead(MemoryLocation location, int blocks, int holds, long longestHoldNanos, long nanos) {
            heard.add("snapshot " + location + " " + blocks + " " + holds + " " + longestHoldNanos + " " + nanos);
        }
    }
}
