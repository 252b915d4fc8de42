package dev.compute.boot;

import org.jspecify.annotations.Nullable;
import org.springframework.boot.context.properties.bind.DefaultValue;
import org.springframework.util.unit.DataSize;

/**
 * One entry of {@code compute.memory.pooling.warmup.<location>}: {@code count} blocks of {@code size}, reserved and
 * cached when the manager starts.
 *
 * @param size  The size of each block; one block of the whole amount reserves one region later requests are carved
 *              from (requests up to 1MB and larger ones come from separate regions: warm each with sizes of its own).
 * @param count How many blocks of that size, 1 by default.
 */
public record WarmupSetting(@Nullable DataSize size, @DefaultValue("1") int count) {}
