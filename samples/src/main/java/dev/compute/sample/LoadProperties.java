package dev.compute.sample;

import java.time.Duration;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.bind.DefaultValue;
import org.springframework.util.unit.DataSize;

/**
 * The load generator.
 *
 * @param enabled Whether the load generator starts with the application; POST /api/load/start starts it later.
 * @param maxLiveBuffers How many buffers it holds at once; each new one closes the oldest.
 * @param maxBufferSize The largest buffer it allocates; sizes are drawn from a few classes up to this.
 * @param pause The pause between two operations, to leave the CPU to the rest of the service.
 */
@ConfigurationProperties("sample.load")
public record LoadProperties(
        @DefaultValue("false") boolean enabled,
        @DefaultValue("32") int maxLiveBuffers,
        @DefaultValue("4MB") DataSize maxBufferSize,
        @DefaultValue("20ms") Duration pause) {

    public LoadProperties {
        if (maxLiveBuffers < 1) {
            throw new IllegalArgumentException("sample.load.max-live-buffers must be at least 1, not " + maxLiveBuffers);
        }
        if (maxBufferSize.toBytes() < 1024) {
            throw new IllegalArgumentException("sample.load.max-buffer-size must be at least 1KB, not " + maxBufferSize);
        }
        if (pause.isNegative()) {
            throw new IllegalArgumentException("sample.load.pause must not be negative, not " + pause);
        }
    }
}
