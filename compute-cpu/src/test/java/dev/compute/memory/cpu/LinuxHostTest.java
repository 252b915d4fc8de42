package dev.compute.memory.cpu;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.DeviceMemoryInfo;
import org.junit.jupiter.api.Test;

class LinuxHostTest {

    private static final long GIB = 1L << 30;

    @Test
    void withoutAContainerLimitTheMachineFiguresStand() {
        assertThat(LinuxHost.withinLimit(16 * GIB, 10 * GIB, 16 * GIB, 9 * GIB)).isEqualTo(new DeviceMemoryInfo(10 * GIB, 16 * GIB));
        assertThat(LinuxHost.withinLimit(16 * GIB, 10 * GIB, -1, -1)).isEqualTo(new DeviceMemoryInfo(10 * GIB, 16 * GIB));
    }

    @Test
    void aLowerContainerLimitCapsTotalAndFree() {
        assertThat(LinuxHost.withinLimit(64 * GIB, 50 * GIB, 4 * GIB, 3 * GIB)).isEqualTo(new DeviceMemoryInfo(3 * GIB, 4 * GIB));
        assertThat(LinuxHost.withinLimit(64 * GIB, 2 * GIB, 4 * GIB, 3 * GIB)).as("the machine is the tighter one")
                .isEqualTo(new DeviceMemoryInfo(2 * GIB, 4 * GIB));
    }

    @Test
    void thisMachineIsReadable() {
        DeviceMemoryInfo memory = LinuxHost.memory();
        assertThat(memory.totalBytes()).isPositive();
        assertThat(memory.freeBytes()).isPositive().isLessThanOrEqualTo(memory.totalBytes());
        assertThat(LinuxHost.processorName()).isNotBlank();
        assertThat(LinuxHost.lockedBytes()).isNotNegative();
    }
}
