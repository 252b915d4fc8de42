package dev.compute.memory.cuda;

import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.DataType;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.spi.NativeAllocation;
import dev.compute.memory.spi.Region;
import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;

/** Argument checks, on allocations that are never touched (their addresses are made up). */
class ChecksTest {

    private static final NativeAllocation DEVICE = new NativeAllocation(MemoryLocation.DEVICE, 0x7f00_0000_0000L, 4096, null, null);
    private static final NativeAllocation HOST = new NativeAllocation(MemoryLocation.HOST, 0x1000L, 4096, null, null);

    @Test
    void rangesInsideTheAllocationPass() {
        assertThatCode(() -> Checks.range(DEVICE, 0, 4096, "target")).doesNotThrowAnyException();
        assertThatCode(() -> Checks.range(DEVICE, 4096, 0, "target")).doesNotThrowAnyException();
        assertThatCode(() -> Checks.range(DEVICE, 17, 4000, "target")).doesNotThrowAnyException();
    }

    @Test
    void rangesOutsideFailWithTheFigures() {
        assertThatThrownBy(() -> Checks.range(DEVICE, 1, 4096, "target"))
                .isInstanceOf(IndexOutOfBoundsException.class)
                .hasMessage("target range [1, 1 + 4096) is outside its allocation of 4096 bytes");
        assertThatThrownBy(() -> Checks.range(DEVICE, -1, 1, "source")).isInstanceOf(IndexOutOfBoundsException.class);
        assertThatThrownBy(() -> Checks.range(DEVICE, 0, -1, "source")).isInstanceOf(IndexOutOfBoundsException.class);
        assertThatThrownBy(() -> Checks.range(DEVICE, Long.MAX_VALUE, 2, "source")).isInstanceOf(IndexOutOfBoundsException.class);
    }

    @Test
    void aSegmentMustHoldTheCopy() {
        MemorySegment heap = MemorySegment.ofArray(new byte[10]);
        assertThatCode(() -> Checks.segment(heap, 10, "source")).doesNotThrowAnyException();
        assertThatThrownBy(() -> Checks.segment(heap, 11, "source"))
                .isInstanceOf(IndexOutOfBoundsException.class)
                .hasMessage("source segment of 10 bytes cannot take a copy of 11 bytes");
    }

    @Test
    void kernelsTakeFloatsAndDoublesOnly() {
        assertThatCode(() -> Checks.region(new Region(DEVICE, 0, 1024, DataType.FLOAT32), "x")).doesNotThrowAnyException();
        assertThatCode(() -> Checks.region(new Region(DEVICE, 0, 512, DataType.FLOAT64), "x")).doesNotThrowAnyException();
        assertThatThrownBy(() -> Checks.region(new Region(DEVICE, 0, 16, DataType.INT32), "x"))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("the op set works on FLOAT32 and FLOAT64; x is INT32");
    }

    @Test
    void kernelsCannotReachHostMemory() {
        assertThatThrownBy(() -> Checks.region(new Region(HOST, 0, 16, DataType.FLOAT32), "target"))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("HOST memory").hasMessageContaining("DEVICE, UNIFIED or PINNED");
    }

    @Test
    void kernelRegionsAreAlignedAndInside() {
        assertThatThrownBy(() -> Checks.region(new Region(DEVICE, 2, 16, DataType.FLOAT32), "x"))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("not a multiple of the 4-byte FLOAT32");
        assertThatThrownBy(() -> Checks.region(new Region(DEVICE, 8, 512, DataType.FLOAT64), "y"))
                .isInstanceOf(IndexOutOfBoundsException.class).hasMessageContaining("y range [8, 8 + 4096)");
        assertThatThrownBy(() -> Checks.region(new Region(DEVICE, 0, -1, DataType.FLOAT64), "x"))
                .isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void axpyPairsRegionsOfOneShape() {
        Region x = new Region(DEVICE, 0, 100, DataType.FLOAT32);
        assertThatCode(() -> Checks.sameShape(x, new Region(DEVICE, 400, 100, DataType.FLOAT32))).doesNotThrowAnyException();
        assertThatThrownBy(() -> Checks.sameShape(x, new Region(DEVICE, 0, 99, DataType.FLOAT32)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("x is 100 x FLOAT32, y is 99 x FLOAT32");
        assertThatThrownBy(() -> Checks.sameShape(x, new Region(DEVICE, 0, 100, DataType.FLOAT64)))
                .isInstanceOf(IllegalArgumentException.class);
    }
}
