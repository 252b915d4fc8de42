package dev.compute.memory.cpu;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_DOUBLE_UNALIGNED;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BufferAccess;
import dev.compute.memory.DataType;
import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.spi.DeviceHandle;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.time.Duration;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * One's own code on pooled memory on the CPU backend, through a device access: Java over its segment, and a native
 * library (libc's {@code memset}, through the FFM linker) handed the segment, at a non-zero offset in the pool's
 * allocation and on a slice. The CPU has no native handle: its memory is the segment.
 */
class CpuDeviceAccessTest {

    private static final MethodHandle MEMSET = Linker.nativeLinker().downcallHandle(
            Linker.nativeLinker().defaultLookup().find("memset").orElseThrow(),
            FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_INT, JAVA_LONG));

    private final UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("cpu")
            .leakDetection(LeakDetectionLevel.PARANOID).timelineInterval(Duration.ZERO).build();

    @AfterEach
    void close() {
        manager.close();
    }

    @Test
    void javaCodeOnTheSegmentAtEveryLocation() {
        for (MemoryLocation location : manager.locations()) {
            try (UnifiedBuffer padding = manager.allocate(700, location);
                 UnifiedBuffer y = manager.allocate(DataType.FLOAT64, 1000, location)) {
                double[] values = new double[1000];
                for (int i = 0; i < values.length; i++) {
                    values[i] = i;
                }
                y.copyFrom(values);
                try (BufferAccess access = y.deviceAccess(AccessMode.READ_WRITE)) {
                    assertThat(access.offset()).as("%s: not at the start of the pool's allocation", location).isPositive();
                    MemorySegment kernel = access.segment();
                    for (long i = 0; i < 1000; i++) {
                        kernel.setAtIndex(JAVA_DOUBLE_UNALIGNED, i, 3 * kernel.getAtIndex(JAVA_DOUBLE_UNALIGNED, i) + 1);
                    }
                }
                double[] back = new double[1000];
                y.copyTo(back);
                assertThat(back[0]).isEqualTo(1);
                assertThat(back[999]).as("%s", location).isEqualTo(2998);
            }
        }
    }

    @Test
    void aNativeLibraryWritesASliceThroughTheSegment() throws Throwable {
        try (UnifiedBuffer buffer = manager.allocate(4096, MemoryLocation.DEVICE)) {
            buffer.copyFrom(new byte[4096]);
            UnifiedBuffer middle = buffer.slice(1000, 24);
            try (BufferAccess access = middle.deviceAccess(AccessMode.WRITE)) {
                MemorySegment bytes = access.segment();
                assertThat(bytes.byteSize()).isEqualTo(24);
                MemorySegment returned = (MemorySegment) MEMSET.invokeExact(bytes, 7, bytes.byteSize());
                assertThat(returned.address()).isEqualTo(bytes.address());
                assertThat(access.handle(DeviceHandle.class)).as("the CPU has no native objects: its memory is the segment")
                        .isSameAs(DeviceHandle.NONE);
            }
            byte[] back = new byte[4096];
            buffer.copyTo(back);
            assertThat(back[999]).isZero();
            assertThat(back[1000]).isEqualTo((byte) 7);
            assertThat(back[1023]).isEqualTo((byte) 7);
            assertThat(back[1024]).isZero();
        }
    }
}
