package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class PoolSizeTest {

    @Test
    void aShareReadsAsInYamlAndComesToWholeBytes() {
        assertThat(PoolSize.ofShare(0.8)).hasToString("80%");
        assertThat(PoolSize.ofShare(0.075)).hasToString("7.5%");
        assertThat(PoolSize.ofShare(1)).hasToString("100%");
        assertThat(((PoolSize.Share) PoolSize.ofShare(0.8)).of(1000)).isEqualTo(800);
        assertThat(((PoolSize.Share) PoolSize.ofShare(0.07)).of(100L << 30)).isEqualTo(7516192768L);
        assertThat(((PoolSize.Share) PoolSize.ofShare(1.0 / 3)).of(10)).as("rounded down").isEqualTo(3);
    }

    @Test
    void bytesReadAsBytes() {
        assertThat(PoolSize.ofBytes(4096)).hasToString("4096 bytes").isEqualTo(new PoolSize.Bytes(4096));
    }
}
