package dev.compute.memory.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.cuda.FakeDriverScenarios.Counters;
import dev.compute.memory.cuda.FakeDriverScenarios.Stub;
import dev.compute.memory.spi.NativeAllocation;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.EnumMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Memory at each location through its own driver call, with the context made current on a thread that had none; the
 * PINNED and UNIFIED ranges the device reads directly, until they are freed; what is no allocation of this backend
 * refused. Runs on the stand-in driver in a JVM of its own ({@link FakeDriverScenarios}), which counts the device,
 * pinned and managed allocations live and the calls made without the context current.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class CudaAllocatorTest {

    @Test
    void eachLocationIsAllocatedAndFreedThroughItsOwnCall() throws Exception {
        FakeDriverScenarios.run(CudaAllocatorTest.class, "eachLocationIsAllocatedAndFreedThroughItsOwnCall");
    }

    @Test
    void pinnedAndManagedMemoryIsDeviceVisibleAndLiveUntilFreed() throws Exception {
        FakeDriverScenarios.run(CudaAllocatorTest.class, "pinnedAndManagedMemoryIsDeviceVisibleAndLiveUntilFreed");
    }

    @Test
    void whatIsNoAllocationOfThisBackendIsRefused() throws Exception {
        FakeDriverScenarios.run(CudaAllocatorTest.class, "whatIsNoAllocationOfThisBackendIsRefused");
    }

    // ---- in the scenario's JVM, on the fake driver -----------------------------------------------------------------------

    public static void main(String[] args) {
        FakeDriverScenarios.exitWith(() -> {
            switch (args[0]) {
                case "eachLocationIsAllocatedAndFreedThroughItsOwnCall" -> Scenarios.eachLocationIsAllocatedAndFreedThroughItsOwnCall();
                case "pinnedAndManagedMemoryIsDeviceVisibleAndLiveUntilFreed" -> Scenarios.pinnedAndManagedMemoryIsDeviceVisibleAndLiveUntilFreed();
                case "whatIsNoAllocationOfThisBackendIsRefused" -> Scenarios.whatIsNoAllocationOfThisBackendIsRefused();
                default -> throw new IllegalArgumentException("no scenario " + args[0]);
            }
        });
    }

    /** What the tests run in their own JVMs, on the fake driver. */
    static final class Scenarios {
        private Scenarios() {}

        /** Runs {@code work} on a new thread, which has no context current until the allocator makes it so. */
        private static void onFreshThread(Runnable work) throws Throwable {
            AtomicReference<Throwable> failure = new AtomicReference<>();
            Thread thread = Thread.ofPlatform().start(() -> {
                try {
                    work.run();
                } catch (Throwable t) {
                    failure.set(t);
                }
            });
            thread.join();
            if (failure.get() != null) {
                throw failure.get();
            }
        }

        static void eachLocationIsAllocatedAndFreedThroughItsOwnCall() throws Throwable {
            CudaContext context = Stub.context();
            CudaAllocator allocator = new CudaAllocator(context);
            Map<MemoryLocation, NativeAllocation> allocations = new EnumMap<>(MemoryLocation.class);
            onFreshThread(() -> {
                for (MemoryLocation location : MemoryLocation.values()) {
                    allocations.put(location, allocator.allocate(location, 4096));
                }
            });

            NativeAllocation device = allocations.get(MemoryLocation.DEVICE);
            assertThat(device.handle()).isInstanceOfSatisfying(DevicePointer.class, pointer -> assertThat(pointer.address()).isEqualTo(device.address()));
            assertThat(device.hostSegment()).isNull();
            NativeAllocation pinned = allocations.get(MemoryLocation.PINNED);
            assertThat(pinned.handle()).isInstanceOfSatisfying(HostPointer.class, pointer -> assertThat(pointer.address()).isEqualTo(pinned.address()));
            NativeAllocation managed = allocations.get(MemoryLocation.UNIFIED);
            assertThat(managed.handle()).isInstanceOf(DevicePointer.class);
            NativeAllocation host = allocations.get(MemoryLocation.HOST);
            assertThat(host.handle()).isInstanceOf(Arena.class);
            assertThat(host.address() % 256).isZero();
            for (MemoryLocation location : MemoryLocation.values()) {
                NativeAllocation allocation = allocations.get(location);
                assertThat(allocation.location()).isEqualTo(location);
                assertThat(allocation.sizeBytes()).isEqualTo(4096);
                if (location != MemoryLocation.DEVICE) {
                    assertThat(allocation.hostSegment().address()).isEqualTo(allocation.address());
                    allocation.hostSegment().set(ValueLayout.JAVA_BYTE, 4095, (byte) 1); // host-accessible to its last byte
                }
            }
            Counters live = Stub.counters();
            assertThat(live.device()).isEqualTo(1);
            assertThat(live.pinned()).isEqualTo(1);
            assertThat(live.managed()).isEqualTo(1);

            onFreshThread(() -> allocations.values().forEach(allocator::free));
            Counters after = Stub.counters();
            assertThat(after.device()).isZero();
            assertThat(after.pinned()).isZero();
            assertThat(after.managed()).isZero();
            assertThat(after.callsWithoutContext()).as("calls made without the context current").isZero();
            assertThat(after.rejected()).as("calls the fake rejected").isZero();
            context.close();
        }

        static void pinnedAndManagedMemoryIsDeviceVisibleAndLiveUntilFreed() throws Throwable {
            CudaContext context = Stub.context();
            CudaAllocator allocator = new CudaAllocator(context);
            assertThat(allocator.liveHostMemory()).isEqualTo(new CudaAllocator.LiveHostMemory(0, 0));
            NativeAllocation pinned = allocator.allocate(MemoryLocation.PINNED, 1 << 20);
            NativeAllocation managed = allocator.allocate(MemoryLocation.UNIFIED, 1 << 16);
            NativeAllocation device = allocator.allocate(MemoryLocation.DEVICE, 1 << 16);
            NativeAllocation host = allocator.allocate(MemoryLocation.HOST, 1 << 16);

            for (NativeAllocation visible : new NativeAllocation[] {pinned, managed}) {
                MemorySegment whole = visible.hostSegment();
                assertThat(allocator.deviceVisible(whole, whole.byteSize())).as("%s", visible.location()).isTrue();
                assertThat(allocator.deviceVisible(whole.asSlice(32), whole.byteSize() - 32)).as("a slice of %s", visible.location()).isTrue();
                assertThat(allocator.deviceVisible(whole.asSlice(32), whole.byteSize())).as("past the end of %s", visible.location()).isFalse();
            }
            assertThat(allocator.deviceVisible(host.hostSegment(), 16)).as("HOST memory is ordinary off-heap memory").isFalse();
            assertThat(allocator.deviceVisible(MemorySegment.ofArray(new byte[16]), 16)).as("a heap array").isFalse();
            assertThat(allocator.liveHostMemory()).isEqualTo(new CudaAllocator.LiveHostMemory(2, (1 << 20) + (1 << 16)));

            allocator.free(managed);
            assertThat(allocator.deviceVisible(pinned.hostSegment(), 16)).isTrue();
            assertThat(allocator.liveHostMemory()).isEqualTo(new CudaAllocator.LiveHostMemory(1, 1 << 20));
            long pinnedAddress = pinned.address();
            allocator.free(pinned);
            assertThat(allocator.deviceVisible(MemorySegment.ofAddress(pinnedAddress).reinterpret(16), 16)).as("freed").isFalse();
            assertThat(allocator.liveHostMemory()).isEqualTo(new CudaAllocator.LiveHostMemory(0, 0));
            allocator.free(device);
            allocator.free(host);
            context.close();
        }

        static void whatIsNoAllocationOfThisBackendIsRefused() throws Throwable {
            CudaContext context = Stub.context();
            CudaAllocator allocator = new CudaAllocator(context);
            NativeAllocation reserved = new NativeAllocation(MemoryLocation.DEVICE, 1L << 40, 1 << 21, null,
                    new CudaVirtualMemory.ReservedRange(1L << 40, 1 << 21, 1 << 21));
            assertThatThrownBy(() -> allocator.free(reserved)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("is a reserved range: give it back with virtualMemory(DEVICE).release");
            NativeAllocation foreign = new NativeAllocation(MemoryLocation.HOST, 0, 16, null, "not a handle");
            assertThatThrownBy(() -> allocator.free(foreign)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("not an allocation of this backend");
            NativeAllocation none = new NativeAllocation(MemoryLocation.HOST, 0, 16, null, null);
            assertThatThrownBy(() -> allocator.free(none)).isInstanceOf(IllegalArgumentException.class);
            assertThat(Stub.counters().rejected()).as("nothing reached the driver").isZero();
            context.close();
        }
    }
}
