package dev.compute.sample;

import dev.compute.memory.InvalidSettingException;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.bind.DefaultValue;
import org.springframework.util.unit.DataSize;

/**
 * Limits on the named vectors the service keeps between requests, so that callers (anonymous ones, in this sample)
 * cannot take the whole pool: past either, storing another vector is refused with 413 and nothing is allocated.
 *
 * @param maxCount How many named vectors the service keeps at most.
 * @param maxBytes How many bytes the kept vectors may take together (8 bytes per FLOAT64 element).
 */
@ConfigurationProperties("sample.vectors")
public record VectorStoreProperties(
        @DefaultValue("1000") int maxCount,
        @DefaultValue("256MB") DataSize maxBytes) {

    // InvalidSettingException, so the starter's failure analyzer reports these as it does compute.* settings.
    public VectorStoreProperties {
        if (maxCount < 1) {
            throw new InvalidSettingException("sample.vectors.max-count", maxCount, "a number of vectors of 1 or more, such as 1000");
        }
        if (maxBytes.toBytes() < Double.BYTES) {
            throw new InvalidSettingException("sample.vectors.max-bytes", maxBytes, "a size of at least 8B (one element), such as 256MB");
        }
    }
}
