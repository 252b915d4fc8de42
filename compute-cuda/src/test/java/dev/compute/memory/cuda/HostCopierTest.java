package dev.compute.memory.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The host half of staging runs on the CPU, so it is checked here: byte-exact at odd sizes and offsets. */
class HostCopierTest {

    @Test
    void partsAreAtLeastAMebibyteAndAtMostOnePerThread() {
        assertThat(HostCopier.parts(1, 4)).isEqualTo(1);
        assertThat(HostCopier.parts((1 << 20) - 1, 4)).isEqualTo(1);
        assertThat(HostCopier.parts(3L << 20, 4)).isEqualTo(3);
        assertThat(HostCopier.parts(64L << 20, 4)).isEqualTo(4);
        assertThat(HostCopier.parts(64L << 20, 1)).isEqualTo(1);
    }

    @Test
    void copiesHeapToNativeExactlyAtOddSizesAndOffsets() {
        byte[] data = new byte[(5 << 20) + 7];
        new Random(7).nextBytes(data);
        try (HostCopier copier = new HostCopier(4, "test-copy-"); Arena arena = Arena.ofShared()) {
            MemorySegment target = arena.allocate(data.length + 100);
            copier.copy(MemorySegment.ofArray(data), 3, target, 41, data.length - 3);
            assertThat(target.asSlice(41, data.length - 3).mismatch(MemorySegment.ofArray(data).asSlice(3))).isEqualTo(-1);
            assertThat(target.get(java.lang.foreign.ValueLayout.JAVA_BYTE, 40)).isZero();
            assertThat(target.get(java.lang.foreign.ValueLayout.JAVA_BYTE, 41L + data.length - 3)).isZero();

            byte[] back = new byte[data.length - 3];
            copier.copy(target, 41, MemorySegment.ofArray(back), 0, back.length);
            assertThat(MemorySegment.ofArray(back).mismatch(MemorySegment.ofArray(data).asSlice(3))).isEqualTo(-1);
        }
    }

    @Test
    void aConfinedSegmentIsCopiedByItsOwnerAlone() {
        byte[] data = new byte[8 << 20];
        new Random(8).nextBytes(data);
        try (HostCopier copier = new HostCopier(4, "test-copy-"); Arena arena = Arena.ofConfined()) {
            MemorySegment confined = arena.allocate(data.length);
            copier.copy(MemorySegment.ofArray(data), 0, confined, 0, data.length);
            assertThat(confined.mismatch(MemorySegment.ofArray(data))).isEqualTo(-1);
        }
    }

    @Test
    void needsAThread() {
        assertThatThrownBy(() -> new HostCopier(0, "x")).isInstanceOf(IllegalArgumentException.class);
    }
}
