package dev.compute.memory.cuda;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static org.assertj.core.api.Assertions.assertThat;

import java.lang.foreign.Arena;
import java.lang.foreign.MemoryLayout.PathElement;
import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;

/** The struct layouts against cuda.h (x86-64), and the zeroed contents the driver insists on. */
class VmmStructsTest {

    @Test
    void allocationPropMatchesCudaH() {
        var prop = VmmStructs.ALLOCATION_PROP;
        assertThat(prop.byteSize()).isEqualTo(32);
        assertThat(prop.byteAlignment()).isEqualTo(8);
        assertThat(prop.byteOffset(PathElement.groupElement("type"))).isEqualTo(0);
        assertThat(prop.byteOffset(PathElement.groupElement("requestedHandleTypes"))).isEqualTo(4);
        assertThat(prop.byteOffset(PathElement.groupElement("location"), PathElement.groupElement("type"))).isEqualTo(8);
        assertThat(prop.byteOffset(PathElement.groupElement("location"), PathElement.groupElement("id"))).isEqualTo(12);
        assertThat(prop.byteOffset(PathElement.groupElement("win32HandleMetaData"))).isEqualTo(16);
        assertThat(prop.byteOffset(PathElement.groupElement("allocFlags"), PathElement.groupElement("compressionType"))).isEqualTo(24);
        assertThat(prop.byteOffset(PathElement.groupElement("allocFlags"), PathElement.groupElement("gpuDirectRDMACapable"))).isEqualTo(25);
        assertThat(prop.byteOffset(PathElement.groupElement("allocFlags"), PathElement.groupElement("usage"))).isEqualTo(26);
        assertThat(prop.byteOffset(PathElement.groupElement("allocFlags"), PathElement.groupElement("reserved"))).isEqualTo(28);
    }

    @Test
    void accessDescMatchesCudaH() {
        var desc = VmmStructs.ACCESS_DESC;
        assertThat(desc.byteSize()).isEqualTo(12);
        assertThat(desc.byteAlignment()).isEqualTo(4);
        assertThat(desc.byteOffset(PathElement.groupElement("location"), PathElement.groupElement("id"))).isEqualTo(4);
        assertThat(desc.byteOffset(PathElement.groupElement("flags"))).isEqualTo(8);
    }

    @Test
    void thePropIsPinnedDeviceMemoryAndOtherwiseZero() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment prop = VmmStructs.devicePinnedProp(arena, 3);
            assertThat(prop.byteSize()).isEqualTo(32);
            // what the probe that ran on the H100 wrote: type 1 at 0, location.type 1 at 8, location.id at 12
            assertThat(prop.get(JAVA_INT, 0)).isEqualTo(1);
            assertThat(prop.get(JAVA_INT, 8)).isEqualTo(1);
            assertThat(prop.get(JAVA_INT, 12)).isEqualTo(3);
            for (long i = 0; i < 32; i++) {
                if (i < 1 || (i >= 8 && i < 9) || (i >= 12 && i < 13)) {
                    continue;
                }
                assertThat(prop.get(JAVA_BYTE, i)).as("byte %d", i).isZero();
            }
        }
    }

    @Test
    void theAccessDescGrantsReadWriteToTheDevice() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment desc = VmmStructs.readWriteAccess(arena, 2);
            assertThat(desc.byteSize()).isEqualTo(12);
            assertThat(desc.get(JAVA_INT, 0)).isEqualTo(1);
            assertThat(desc.get(JAVA_INT, 4)).isEqualTo(2);
            assertThat(desc.get(JAVA_INT, 8)).isEqualTo(3);
        }
    }
}
