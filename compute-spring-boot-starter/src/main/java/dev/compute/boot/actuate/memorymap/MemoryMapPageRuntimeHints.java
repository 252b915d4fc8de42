package dev.compute.boot.actuate.memorymap;

import org.jspecify.annotations.Nullable;
import org.springframework.aot.hint.RuntimeHints;
import org.springframework.aot.hint.RuntimeHintsRegistrar;

/**
 * The memory map page's static files, for a native image: they are read from the class path at run time, which
 * GraalVM allows only for resources registered at build time.
 */
class MemoryMapPageRuntimeHints implements RuntimeHintsRegistrar {

    @Override
    public void registerHints(RuntimeHints hints, @Nullable ClassLoader classLoader) {
        hints.resources().registerPattern(ComputeMemoryMapEndpoint.LOCATION + "*");
    }
}
