package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

/** The work-groups a backend launches a shape in, and how the work items round up to them. */
class LaunchShapeTest {

    @Test
    void theDefaultGroupFitsTheKernelsLimitHalvingTheLastDimensionFirst() {
        assertThat(LaunchShape.of(1000).workGroupOrDefault(1024)).containsExactly(256);
        assertThat(LaunchShape.of(1000).workGroupOrDefault(100)).containsExactly(64);
        assertThat(LaunchShape.of(10, 10).workGroupOrDefault(1024)).containsExactly(16, 16);
        assertThat(LaunchShape.of(10, 10).workGroupOrDefault(64)).containsExactly(8, 8);
        assertThat(LaunchShape.of(10, 10, 10).workGroupOrDefault(1024)).containsExactly(8, 8, 4);
        assertThat(LaunchShape.of(10, 10, 10).workGroupOrDefault(32)).containsExactly(4, 4, 2);
        assertThat(LaunchShape.of(10, 10, 10).workGroupOrDefault(1)).containsExactly(1, 1, 1);
    }

    @Test
    void aGroupGivenIsKeptAndTheSizesRoundUpToIt() {
        LaunchShape shape = LaunchShape.of(37, 19).withWorkGroup(8, 4);
        assertThat(shape.workGroupOrDefault(16)).as("as given, whatever the limit: the device says no").containsExactly(8, 4);
        assertThat(shape.roundedUpTo(new long[] {8, 4})).containsExactly(40, 20);
        assertThat(shape.hasWorkGroup()).isTrue();
        assertThat(shape.workGroup(1)).isEqualTo(4);
        assertThat(shape.totalSize()).isEqualTo(37 * 19);
        assertThat(shape).hasToString("LaunchShape[37, 19] in work-groups of [8, 4]").isEqualTo(LaunchShape.of(37, 19).withWorkGroup(8, 4));
        assertThat(LaunchShape.of(256).roundedUpTo(new long[] {256})).containsExactly(256);
    }

    @Test
    void badShapesAreRefused() {
        assertThatThrownBy(() -> LaunchShape.of(0)).isInstanceOf(IllegalArgumentException.class).hasMessage("work items must be positive: [0]");
        assertThatThrownBy(() -> LaunchShape.of(4, -1)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> LaunchShape.of(4).withWorkGroup(2, 2)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("a 1-dimensional shape needs a work-group of 1 size(s); given 2");
        assertThatThrownBy(() -> LaunchShape.of(4).withWorkGroup(0)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> LaunchShape.of(1L << 32, 1L << 31, 2).totalSize()).as("a count a long does not hold, said of the shape")
                .isInstanceOf(ArithmeticException.class)
                .hasMessage("LaunchShape[4294967296, 2147483648, 2] has more than Long.MAX_VALUE work items in all");
        assertThat(LaunchShape.of(1L << 31, 1L << 31, 1).totalSize()).isEqualTo(1L << 62);
        assertThatThrownBy(() -> LaunchShape.of(4).workGroup(0)).isInstanceOf(IllegalStateException.class);
    }
}
