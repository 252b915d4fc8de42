import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.jar.JarInputStream;
import java.util.jar.Manifest;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;

/**
 * Checks the bundle the release profile makes for Maven Central (java .ci/CheckReleaseBundle.java BUNDLE): every
 * published module is in it and nothing else; each file has its signature and checksums; each module with code has its
 * jar, sources jar and javadoc jar; every binary jar (the core's tests jar too) carries META-INF/LICENSE, an
 * Implementation-Version equal to its version and an Automatic-Module-Name no other jar has.
 */
class CheckReleaseBundle {

    static final Set<String> PUBLISHED = Set.of("compute-bom", "compute-parent", "compute-core", "compute-cpu", "compute-cuda",
            "compute-opencl", "compute-spring-boot-starter", "compute-spring-boot-test");
    static final Set<String> POM_ONLY = Set.of("compute-bom", "compute-parent");

    public static void main(String[] args) throws IOException {
        List<String> problems = new ArrayList<>();
        Map<String, String> moduleNames = new HashMap<>();
        Set<String> modules = new TreeSet<>();
        int jars = 0;
        try (ZipFile bundle = new ZipFile(Path.of(args[0]).toFile())) {
            Set<String> names = new TreeSet<>();
            bundle.stream().filter(entry -> !entry.isDirectory()).forEach(entry -> names.add(entry.getName()));
            for (String name : names) {
                if (name.matches(".*\\.(asc|md5|sha1|sha256|sha512)$")) {
                    continue;
                }
                String[] path = name.split("/"); // dev/compute/<artifactId>/<version>/<file>
                String artifact = path[path.length - 3];
                String version = path[path.length - 2];
                String file = path[path.length - 1];
                modules.add(artifact);
                for (String suffix : List.of(".asc", ".md5", ".sha1")) {
                    if (!names.contains(name + suffix)) {
                        problems.add(name + " has no " + suffix);
                    }
                }
                String base = artifact + "-" + version;
                if (file.equals(base + ".pom") && !POM_ONLY.contains(artifact)) {
                    for (String part : List.of(".jar", "-sources.jar", "-javadoc.jar")) {
                        if (!names.contains(name.replace(".pom", part))) {
                            problems.add(artifact + " has no " + base + part);
                        }
                    }
                }
                if (file.endsWith(".jar") && !file.endsWith("-sources.jar") && !file.endsWith("-javadoc.jar")) {
                    jars++;
                    checkJar(bundle, bundle.getEntry(name), version, moduleNames, problems);
                }
            }
        }
        if (!modules.equals(PUBLISHED)) {
            problems.add("the bundle holds " + modules + "; the published modules are " + new TreeSet<>(PUBLISHED));
        }
        if (!problems.isEmpty()) {
            problems.forEach(problem -> System.err.println("release bundle: " + problem));
            System.exit(1);
        }
        System.out.println("release dry run: " + modules.size() + " modules, " + jars + " jars signed, checksummed, licensed, versioned, each its own module name");
    }

    static void checkJar(ZipFile bundle, ZipEntry entry, String version, Map<String, String> moduleNames, List<String> problems)
            throws IOException {
        String jar = entry.getName().substring(entry.getName().lastIndexOf('/') + 1);
        boolean license = false;
        Manifest manifest;
        try (InputStream in = bundle.getInputStream(entry); JarInputStream contents = new JarInputStream(in)) {
            manifest = contents.getManifest();
            for (var file = contents.getNextJarEntry(); file != null; file = contents.getNextJarEntry()) {
                license |= file.getName().equals("META-INF/LICENSE");
            }
        }
        if (!license) {
            problems.add(jar + " has no META-INF/LICENSE");
        }
        var attributes = manifest == null ? null : manifest.getMainAttributes();
        String implementationVersion = attributes == null ? null : attributes.getValue("Implementation-Version");
        if (!version.equals(implementationVersion)) {
            problems.add(jar + ": Implementation-Version " + implementationVersion + ", not " + version);
        }
        String moduleName = attributes == null ? null : attributes.getValue("Automatic-Module-Name");
        if (moduleName == null) {
            problems.add(jar + " has no Automatic-Module-Name");
        } else if (moduleNames.putIfAbsent(moduleName, jar) != null) {
            problems.add(jar + " has the Automatic-Module-Name " + moduleName + " of " + moduleNames.get(moduleName));
        }
    }
}
