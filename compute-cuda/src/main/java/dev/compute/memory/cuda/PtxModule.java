package dev.compute.memory.cuda;

import static dev.compute.memory.cuda.DriverCalls.cuModuleGetFunction;
import static dev.compute.memory.cuda.DriverCalls.cuModuleLoadData;
import static dev.compute.memory.cuda.DriverCalls.cuModuleUnload;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.Arrays;
import jcuda.driver.CUfunction;
import jcuda.driver.CUmodule;

/** A PTX file from the class path, loaded into the current context with {@code cuModuleLoadData} (the driver JIT-compiles it). */
final class PtxModule implements AutoCloseable {

    private final String resource;
    private final CUmodule module = new CUmodule();

    /** Loads {@code resource} into the context current on this thread. */
    PtxModule(String resource) {
        this.resource = resource;
        byte[] ptx = read(resource);
        // cuModuleLoadData takes PTX as a NUL-terminated string
        byte[] terminated = Arrays.copyOf(ptx, ptx.length + 1);
        CudaResults.check(cuModuleLoadData(module, terminated), "cuModuleLoadData(" + resource + ")");
    }

    static byte[] read(String resource) {
        try (InputStream in = PtxModule.class.getResourceAsStream(resource)) {
            if (in == null) {
                throw new IllegalStateException("PTX resource " + resource + " is missing from the class path");
            }
            return in.readAllBytes();
        } catch (IOException e) {
            throw new UncheckedIOException("reading PTX resource " + resource, e);
        }
    }

    CUfunction function(String name) {
        CUfunction function = new CUfunction();
        CudaResults.check(cuModuleGetFunction(function, module, name), "cuModuleGetFunction(" + name + " in " + resource + ")");
        return function;
    }

    @Override
    public void close() {
        cuModuleUnload(module);
    }
}
