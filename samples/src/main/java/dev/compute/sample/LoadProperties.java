package dev.compute.sample;

import dev.compute.memory.InvalidSettingException;
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

    // InvalidSettingException, so the starter's failure analyzer reports these as it does compute.* settings.
    public LoadProperties {
        if (maxLiveBuffers < 1) {
            throw new InvalidSettingException("sample.load.max-live-buffers", maxLiveBuffers, "a number of buffers of 1 or more, such as 32");
        }
        if (maxBufferSize.toBytes() < 1024) {
            throw new InvalidSettingException("sample.load.max-buffer-size", maxBufferSize, "a size of at least 1KB, such as 4MB");
        }
        if (pause.isNegative()) {
            throw new InvalidSettingException("sample.load.pause", pause, "0 (no pause) or a positive duration, such as 20ms");
        }
    }
}
