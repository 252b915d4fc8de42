package dev.compute.memory.internal;

import static org.assertj.core.api.Assertions.assertThat;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.Test;

class StagingMemoryTest {

    @Test
    void memoryOfTheSizeAskedThatAnyThreadMayUseUntilFreed() throws Exception {
        MemorySegment staging = StagingMemory.allocate(1 << 20);
        assertThat(staging.byteSize()).isEqualTo(1 << 20);
        staging.setAtIndex(ValueLayout.JAVA_LONG, (1 << 17) - 1, 42L);
        long[] read = new long[1];
        Thread.ofPlatform().start(() -> read[0] = staging.getAtIndex(ValueLayout.JAVA_LONG, (1 << 17) - 1)).join();
        assertThat(read[0]).as("not confined to the allocating thread: the copy's end frees it elsewhere").isEqualTo(42L);
        StagingMemory.free(staging);

        MemorySegment empty = StagingMemory.allocate(0);
        assertThat(empty.byteSize()).isZero();
        assertThat(empty.address()).as("an address of its own").isNotZero();
        StagingMemory.free(empty);
    }
}
