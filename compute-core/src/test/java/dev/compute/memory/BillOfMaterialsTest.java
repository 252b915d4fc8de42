package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import javax.xml.parsers.DocumentBuilderFactory;
import org.junit.jupiter.api.Test;
import org.w3c.dom.Element;
import org.w3c.dom.NodeList;

/**
 * compute-bom, which users import to leave the versions out, manages every artifact the build publishes: each jar
 * module's jar and the core's tests jar (the backend contract suites), which a build importing the BOM otherwise
 * cannot name without a version.
 */
class BillOfMaterialsTest {

    private static final Path ROOT = Path.of("..").toAbsolutePath().normalize();

    @Test
    void theBomManagesEveryPublishedJarAndTheCoresTestsJar() throws Exception {
        List<String> expected = new ArrayList<>();
        for (String module : texts(element(ROOT.resolve("pom.xml"), "modules"), "module")) {
            String pom = Files.readString(ROOT.resolve(module).resolve("pom.xml"));
            if (!module.equals("compute-bom") && !pom.contains("<maven.deploy.skip>true</maven.deploy.skip>")) {
                expected.add(module + ":jar");
            }
        }
        expected.add("compute-core:test-jar");

        List<String> managed = new ArrayList<>();
        NodeList dependencies = element(ROOT.resolve("compute-bom/pom.xml"), "dependencyManagement").getElementsByTagName("dependency");
        for (int i = 0; i < dependencies.getLength(); i++) {
            Element dependency = (Element) dependencies.item(i);
            List<String> type = texts(dependency, "type");
            managed.add(texts(dependency, "artifactId").getFirst() + ":" + (type.isEmpty() ? "jar" : type.getFirst()));
        }
        assertThat(managed).containsExactlyInAnyOrderElementsOf(expected);
    }

    private static Element element(Path pom, String name) throws Exception {
        return (Element) DocumentBuilderFactory.newInstance().newDocumentBuilder().parse(pom.toFile()).getElementsByTagName(name).item(0);
    }

    private static List<String> texts(Element parent, String name) {
        List<String> texts = new ArrayList<>();
        NodeList nodes = parent.getElementsByTagName(name);
        for (int i = 0; i < nodes.getLength(); i++) {
            texts.add(nodes.item(i).getTextContent().strip());
        }
        return texts;
    }
}
